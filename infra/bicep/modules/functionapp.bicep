// Flex Consumption plan and the Linux Python function app (orchestrator + worker functions).
//
// On Flex Consumption the language and version come from functionAppConfig.runtime, and the
// platform pins the Functions host to ~4: the FUNCTIONS_WORKER_RUNTIME app setting is rejected
// and FUNCTIONS_EXTENSION_VERSION is ignored, so neither is set here.

param planName string
param appName string
param location string
param tags object = {}
param identityId string
param identityClientId string
param storageAccountName string
param deploymentContainerName string
param appInsightsName string
param instanceMemoryMB int = 2048
param maximumInstanceCount int = 40
param pythonVersion string = '3.12'

@description('DELTAEXTRAS_TABLES')
param tables string
@description('DELTAEXTRAS_QUEUE')
param queueName string
@description('DELTAEXTRAS_POISON_QUEUE (always <queue>-poison)')
param poisonQueueName string
@description('DELTAEXTRAS_SCHEDULE')
param schedule string
@description('DELTAEXTRAS_STORAGE_OPTIONS')
param storageOptions string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  // checkov:skip=CKV_AZURE_225: Hourly batch work: a zone outage delays partitions, the queue keeps them and retries; Flex Consumption zone redundancy exists only in some regions.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  // checkov:skip=CKV_AZURE_222: No HTTP-triggered functions (timer + queue only); the deployment endpoint used by azd and func publish needs public access unless VNet integration and private endpoints are added.
  // checkov:skip=CKV_AZURE_17: No HTTP-triggered functions: the app serves no client requests whose certificates could be checked.
  // checkov:skip=CKV_AZURE_212: Serverless plan that scales from zero; instances exist only while partitions are queued.
  // checkov:skip=CKV_AZURE_213: Health check probes an HTTP path; the app has no HTTP functions and the platform scales it per trigger.
  name: appName
  location: location
  // azd deploys the service named "deltaextras" in azure.yaml to the resource with this tag.
  tags: union(tags, {
    'azd-service-name': 'deltaextras'
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      // Every app setting the code reads (deltaextras.settings, platform "azure") plus the host's own.
      // tests/test_infra.py evaluates this list and fails when a setting is missing.
      appSettings: [
        // Functions host: identity-based AzureWebJobsStorage (no connection string, shared key off).
        {
          name: 'AzureWebJobsStorage__accountName'
          value: storage.name
        }
        {
          name: 'AzureWebJobsStorage__credential'
          value: 'managedidentity'
        }
        {
          name: 'AzureWebJobsStorage__clientId'
          value: identityClientId
        }
        {
          name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
          value: appInsights.properties.ConnectionString
        }
        {
          name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
          value: 'ClientId=${identityClientId};Authorization=AAD'
        }
        // deltaextras
        {
          name: 'DELTAEXTRAS_TABLES'
          value: tables
        }
        {
          name: 'DELTAEXTRAS_QUEUE'
          value: queueName
        }
        {
          name: 'DELTAEXTRAS_POISON_QUEUE'
          value: poisonQueueName
        }
        {
          name: 'DELTAEXTRAS_SCHEDULE'
          value: schedule
        }
        {
          name: 'DELTAEXTRAS_STORAGE__queueServiceUri'
          value: storage.properties.primaryEndpoints.queue
        }
        {
          name: 'DELTAEXTRAS_STORAGE__credential'
          value: 'managedidentity'
        }
        {
          name: 'DELTAEXTRAS_STORAGE__clientId'
          value: identityClientId
        }
        {
          name: 'DELTAEXTRAS_STORAGE_OPTIONS'
          value: storageOptions
        }
        {
          name: 'AZURE_CLIENT_ID'
          value: identityClientId
        }
      ]
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    }
  }
}

output name string = app.name
output id string = app.id
output defaultHostName string = app.properties.defaultHostName
