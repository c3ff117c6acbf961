// Blob data rights for the app's identity on the Delta table's container, in the (existing)
// table storage account. Deployed into the table account's resource group.
//
// Storage Blob Data Contributor on the container only: the orchestrator reads the table's log
// and checkpoints; the worker reads and writes data files and commits to _delta_log (and may
// delete expired log files after a checkpoint). Nothing else in that account is reachable.
//
// With pathPrefix set, the assignment carries an ABAC condition (Microsoft's documented
// pattern for "read, write or delete blobs under a path" plus "list blobs with a prefix"):
// blob reads, writes, deletes, appends and renames must target a path that starts with the
// prefix, and listings must ask for a prefix that starts with it. Use a trailing slash.

param principalId string
param storageAccountName string
param containerName string
param pathPrefix string = ''

var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var blobs = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs'
var pathCondition = '((!(ActionMatches{\'${blobs}/read\'} AND NOT SubOperationMatches{\'Blob.List\'}) AND !(ActionMatches{\'${blobs}/write\'}) AND !(ActionMatches{\'${blobs}/delete\'}) AND !(ActionMatches{\'${blobs}/add/action\'}) AND !(ActionMatches{\'${blobs}/move/action\'})) OR (@Resource[${blobs}:path] StringStartsWith \'${pathPrefix}\')) AND ((!(ActionMatches{\'${blobs}/read\'} AND SubOperationMatches{\'Blob.List\'})) OR (@Request[${blobs}:prefix] StringStartsWith \'${pathPrefix}\'))'

resource tableAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: tableAccount
  name: 'default'
}

resource container 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  parent: blobService
  name: containerName
}

resource tableBlobContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(container.id, principalId, storageBlobDataContributor)
  scope: container
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
    description: empty(pathPrefix) ? 'deltaextras: Delta table container' : 'deltaextras: Delta tables under ${pathPrefix}'
    condition: empty(pathPrefix) ? null : pathCondition
    conditionVersion: empty(pathPrefix) ? null : '2.0'
  }
}

output scope string = container.id
