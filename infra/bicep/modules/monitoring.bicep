// Log Analytics workspace and workspace-based Application Insights. Local (key) authentication
// is disabled on Application Insights: the app sends telemetry with its managed identity
// (APPLICATIONINSIGHTS_AUTHENTICATION_STRING, role Monitoring Metrics Publisher).

param logAnalyticsName string
param appInsightsName string
param location string
param tags object = {}
param retentionInDays int = 30

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

output logAnalyticsId string = logAnalytics.id
output appInsightsName string = appInsights.name
output appInsightsId string = appInsights.id
