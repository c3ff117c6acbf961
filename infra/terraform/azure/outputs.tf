output "resource_group_name" {
  description = "Resource group of the app."
  value       = azurerm_resource_group.app.name
}

output "function_app_name" {
  description = "Target of `func azure functionapp publish <name>`."
  value       = azapi_resource.function_app.name
}

output "function_app_hostname" {
  description = "Default host name of the function app."
  value       = azapi_resource.function_app.output.properties.defaultHostName
}

output "storage_account_name" {
  description = "The app's own storage account (queues, host state, deployment package)."
  value       = azurerm_storage_account.app.name
}

output "managed_identity_client_id" {
  description = "AZURE_CLIENT_ID of the app's user-assigned identity."
  value       = azurerm_user_assigned_identity.app.client_id
}

output "work_queue_name" {
  description = "DELTAEXTRAS_QUEUE."
  value       = azurerm_storage_queue.work.name
}

output "poison_queue_name" {
  description = "DELTAEXTRAS_POISON_QUEUE."
  value       = azurerm_storage_queue.poison.name
}
