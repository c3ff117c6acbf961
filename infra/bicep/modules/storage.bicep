// The function app's own storage account: Flex Consumption deployment container, host state
// (timer schedule monitor, leases) and the two queues. Identity-only: shared-key access is off,
// TLS 1.2 minimum, no anonymous blob access. The Delta table lives in a different account.

param name string
param location string
param tags object = {}
param deploymentContainerName string
param workQueueName string
param poisonQueueName string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_35: Flex Consumption without VNet integration reaches its storage over the public endpoint and is not a trusted service for the firewall bypass; access is identity-only (shared key disabled).
  // checkov:skip=CKV_AZURE_59: Same as CKV_AZURE_35: public endpoint needed without VNet integration; every request is Entra ID authenticated and authorised per queue or container.
  // checkov:skip=CKV_AZURE_206: Holds only transient queue messages, host leases and the deployment package, all recreated by the next run or deploy; LRS is enough.
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    allowCrossTenantReplication: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      // Flex Consumption without VNet integration reaches storage over its public endpoint.
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
    encryption: {
      keySource: 'Microsoft.Storage'
      requireInfrastructureEncryption: true
      services: {
        blob: {
          enabled: true
          keyType: 'Account'
        }
        file: {
          enabled: true
          keyType: 'Account'
        }
        queue: {
          enabled: true
          keyType: 'Account'
        }
        table: {
          enabled: true
          keyType: 'Account'
        }
      }
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

// One message per partition (base64 JSON), written by the orchestrator, read by the worker.
resource workQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queueService
  name: workQueueName
}

// Messages that failed maxDequeueCount (host.json) times, or that the worker rejected as permanent failures.
resource poisonQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queueService
  name: poisonQueueName
}

output name string = storage.name
output id string = storage.id
output deploymentContainerName string = deploymentContainer.name
output workQueueName string = workQueue.name
output poisonQueueName string = poisonQueue.name
