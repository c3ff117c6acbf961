// Parameters for `azd up` / `azd provision`. azd passes the azd environment (.azure/<env>/.env,
// set with `azd env set NAME VALUE`) to this file; every app setting that has no value here
// falls back to the code default. See docs/deploy.md.
using 'main.bicep'

param environmentName = readEnvironmentVariable('AZURE_ENV_NAME')
param location = readEnvironmentVariable('AZURE_LOCATION')

// The existing storage account that holds the Delta table(s).
param tableStorageAccountName = readEnvironmentVariable('DELTA_TABLE_STORAGE_ACCOUNT')
param tableStorageResourceGroupName = readEnvironmentVariable('DELTA_TABLE_RESOURCE_GROUP')
param tableStorageSubscriptionId = readEnvironmentVariable('DELTA_TABLE_SUBSCRIPTION_ID', '')
param tableContainerName = readEnvironmentVariable('DELTA_TABLE_CONTAINER')
param tablePathPrefix = readEnvironmentVariable('DELTA_TABLE_PATH_PREFIX', '')

// App settings (deltaextras.settings): the azd environment variable has the app setting's name.
param deltaextrasTables = readEnvironmentVariable('DELTAEXTRAS_TABLES')
param queueName = readEnvironmentVariable('DELTAEXTRAS_QUEUE', '')
param schedule = readEnvironmentVariable('DELTAEXTRAS_SCHEDULE', '')
param storageOptions = readEnvironmentVariable('DELTAEXTRAS_STORAGE_OPTIONS', '')

// Operations.
param alertEmail = readEnvironmentVariable('DELTAEXTRAS_ALERT_EMAIL', '')
