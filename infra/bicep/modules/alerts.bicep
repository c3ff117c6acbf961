// Alert when the poison queue is not empty.
//
// Azure Storage publishes queue metrics per account only (no per-queue dimension), so the alert
// is a log search over the queue service's resource logs: the queue service sends its write and
// delete logs (not reads: the trigger's polling would dominate) to Log Analytics, and the rule
// counts messages put into the poison queue minus messages deleted from it (since the last
// "clear") over the last two days. It fires while that count is above zero and resolves
// itself once the messages are deleted or cleared.

param location string
param tags object = {}
param storageAccountName string
param poisonQueueName string
param logAnalyticsId string
param alertEmail string = ''
param namePrefix string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' existing = {
  parent: storage
  name: 'default'
}

resource queueDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'queue-writes-to-log-analytics'
  scope: queueService
  properties: {
    workspaceId: logAnalyticsId
    logs: [
      {
        category: 'StorageWrite'
        enabled: true
      }
      {
        category: 'StorageDelete'
        enabled: true
      }
    ]
  }
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: '${namePrefix}-ops'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'deltaextras'
    enabled: true
    emailReceivers: [
      {
        name: 'ops'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var poisonKey = '/${storageAccountName}/${poisonQueueName}/'
var pendingPoisonQuery = 'let poison = StorageQueueLogs | where AccountName == \'${storageAccountName}\' and ObjectKey startswith \'${poisonKey}\'; let cleared = toscalar(poison | where OperationName == \'ClearMessages\' | summarize max(TimeGenerated)); poison | where isnull(cleared) or TimeGenerated > cleared | summarize Added = countif(OperationName == \'PutMessage\'), Removed = countif(OperationName == \'DeleteMessage\') | extend Pending = Added - Removed | where Pending > 0'

resource poisonQueueAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${namePrefix}-poison-queue-not-empty'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'deltaextras: poison queue ${poisonQueueName} is not empty'
    description: 'Partitions that failed 5 times, or that the worker rejected as permanent failures, wait in ${poisonQueueName}. Inspect them, fix the cause, then move them back to the work queue or delete them.'
    severity: 2
    enabled: true
    scopes: [
      logAnalyticsId
    ]
    evaluationFrequency: 'PT1H'
    windowSize: 'P2D'
    // StorageQueueLogs exists in the workspace only after the first log arrives.
    skipQueryValidation: true
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: pendingPoisonQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: empty(alertEmail) ? [] : [
        actionGroup.id
      ]
    }
  }
  dependsOn: [
    queueDiagnostics
  ]
}

output alertId string = poisonQueueAlert.id
