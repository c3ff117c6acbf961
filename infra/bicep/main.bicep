// deltaextras on Azure Functions (Flex Consumption), deployed with `azd up` (see docs/deploy.md).
//
// Creates: a resource group, a user-assigned managed identity, the app's own storage account
// (deployment package, host state, the work queue and its poison queue), Log Analytics +
// Application Insights, a Flex Consumption plan and function app, the role assignments, and an
// alert when a message lands in the poison queue. The Delta table's storage account is NOT
// created: it is an existing account; the identity gets blob data rights on its container only.
//
// Why Flex Consumption (not the Linux Consumption plan): it supports identity-based
// AzureWebJobsStorage and an identity-authenticated deployment container, so the app's storage
// account can run with shared-key access disabled; it offers 2048/4096 MB instances (a partition
// rewrite holds a row group in memory; Linux Consumption stops at 1.5 GB); VNet integration is
// available when the table account is locked down; and Linux Consumption is being retired.
targetScope = 'subscription'

// ---------------------------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------------------------

@minLength(1)
@maxLength(64)
@description('azd environment name; used to name the resource group and derive resource names.')
param environmentName string

@minLength(1)
@description('Azure region for all resources (must offer the Flex Consumption plan).')
param location string

@description('Resource group to create; empty: rg-<environmentName>.')
param resourceGroupName string = ''

// ---------------------------------------------------------------------------------------------
// The Delta table (an existing storage account, usually ADLS Gen2)
// ---------------------------------------------------------------------------------------------

@minLength(3)
@maxLength(24)
@description('Name of the existing storage account that holds the Delta table(s).')
param tableStorageAccountName string

@minLength(1)
@description('Resource group of the table storage account.')
param tableStorageResourceGroupName string

@description('Subscription of the table storage account; empty: this deployment\'s subscription.')
param tableStorageSubscriptionId string = ''

@minLength(3)
@maxLength(63)
@description('Container (file system) that holds the Delta table(s). Blob data rights are granted on this container only.')
param tableContainerName string

@description('Optional path prefix inside the container (e.g. \'warehouse/\'). When set, the blob role assignment carries an ABAC condition that limits reads, writes and deletes to blobs under this prefix.')
param tablePathPrefix string = ''

// ---------------------------------------------------------------------------------------------
// App settings read by the code (deltaextras.settings). Names in comments are the app settings.
// ---------------------------------------------------------------------------------------------

@minLength(2)
@description('DELTAEXTRAS_TABLES (required): JSON list of tables to maintain; also the allow-list the worker enforces.')
param deltaextrasTables string

@description('DELTAEXTRAS_QUEUE: work queue name. Empty: the code default. The poison queue is always <queue>-poison (the Functions host\'s convention).')
param queueName string = ''

@description('DELTAEXTRAS_SCHEDULE: orchestrator timer (NCRONTAB with seconds). Empty: the code default.')
param schedule string = ''

@description('DELTAEXTRAS_STORAGE_OPTIONS: JSON object of extra storage options for the tables. Empty: the code default. Prefer the managed identity to secrets here.')
param storageOptions string = ''

// The code's defaults (deltaextras.settings); tests/test_infra.py fails when they drift.
var codeDefaults = {
  DELTAEXTRAS_QUEUE: 'deltaextras-rorder'
  DELTAEXTRAS_SCHEDULE: '0 0 * * * *'
  DELTAEXTRAS_STORAGE_OPTIONS: '{}'
}

// ---------------------------------------------------------------------------------------------
// Sizing and operations
// ---------------------------------------------------------------------------------------------

@allowed([2048, 4096])
@description('Flex Consumption instance memory (MB). Each instance runs one partition rewrite at a time (host.json batchSize 1).')
param instanceMemoryMB int = 2048

@minValue(1)
@maxValue(1000)
@description('Upper bound on instances, i.e. on partitions rewritten at once.')
param maximumInstanceCount int = 40

@allowed(['3.10', '3.11', '3.12'])
@description('Python version of the function app.')
param pythonVersion string = '3.12'

@minValue(30)
@maxValue(730)
@description('Log Analytics retention in days.')
param logRetentionDays int = 30

@description('E-mail address notified when a message lands in the poison queue; empty: the alert fires without notification (visible in Azure Monitor).')
param alertEmail string = ''

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
  application: 'deltaextras'
}
var workQueueName = empty(queueName) ? codeDefaults.DELTAEXTRAS_QUEUE : queueName
var poisonQueueName = '${workQueueName}-poison'
var scheduleValue = empty(schedule) ? codeDefaults.DELTAEXTRAS_SCHEDULE : schedule
var storageOptionsValue = empty(storageOptions) ? codeDefaults.DELTAEXTRAS_STORAGE_OPTIONS : storageOptions
var tableSubscription = empty(tableStorageSubscriptionId) ? subscription().subscriptionId : tableStorageSubscriptionId

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: empty(resourceGroupName) ? 'rg-${environmentName}' : resourceGroupName
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-deltaextras-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    appInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
    retentionInDays: logRetentionDays
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: 'app-package'
    workQueueName: workQueueName
    poisonQueueName: poisonQueueName
  }
}

module appRoles 'modules/app-roles.bicep' = {
  name: 'app-roles'
  scope: rg
  params: {
    principalId: identity.outputs.principalId
    storageAccountName: storage.outputs.name
    workQueueName: workQueueName
    poisonQueueName: poisonQueueName
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module tableAccess 'modules/table-access.bicep' = {
  name: 'table-access-${resourceToken}'
  scope: resourceGroup(tableSubscription, tableStorageResourceGroupName)
  params: {
    principalId: identity.outputs.principalId
    storageAccountName: tableStorageAccountName
    containerName: tableContainerName
    pathPrefix: tablePathPrefix
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  scope: rg
  params: {
    planName: 'plan-${resourceToken}'
    appName: 'func-deltaextras-${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerName: storage.outputs.deploymentContainerName
    appInsightsName: monitoring.outputs.appInsightsName
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    pythonVersion: pythonVersion
    tables: deltaextrasTables
    queueName: workQueueName
    poisonQueueName: poisonQueueName
    schedule: scheduleValue
    storageOptions: storageOptionsValue
  }
  // The host must be able to reach its storage and queues from its first start.
  dependsOn: [
    appRoles
    tableAccess
  ]
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    location: location
    tags: tags
    storageAccountName: storage.outputs.name
    poisonQueueName: poisonQueueName
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    alertEmail: alertEmail
    namePrefix: 'deltaextras-${resourceToken}'
  }
}

// azd writes these into the environment (.azure/<env>/.env); none shares a name with an input
// read by main.bicepparam, so a provision never feeds its own outputs back as settings.
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output DELTAEXTRAS_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_WORK_QUEUE_NAME string = workQueueName
output AZURE_POISON_QUEUE_NAME string = poisonQueueName
