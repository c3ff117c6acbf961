# deltaextras on Azure Functions (Flex Consumption): the same resources as infra/bicep.
# See docs/deploy.md for what this creates and which variables to fill.
#
# Why Flex Consumption: identity-based AzureWebJobsStorage and an identity-authenticated
# deployment container (so the app's storage account runs with shared-key access off),
# 2048/4096 MB instances for partition rewrites, optional VNet integration, and Linux
# Consumption is being retired.

data "azurerm_client_config" "current" {}

locals {
  suffix            = var.name_suffix != "" ? var.name_suffix : substr(sha1("${data.azurerm_client_config.current.subscription_id}/${var.resource_group_name}"), 0, 13)
  poison_queue_name = "${var.queue_name}-poison"
  tags              = merge({ application = "deltaextras" }, var.tags)

  table_subscription_id = coalesce(var.table_storage_subscription_id, data.azurerm_client_config.current.subscription_id)
  table_container_scope = "/subscriptions/${local.table_subscription_id}/resourceGroups/${var.table_storage_resource_group_name}/providers/Microsoft.Storage/storageAccounts/${var.table_storage_account_name}/blobServices/default/containers/${var.table_container_name}"

  # ABAC condition used when table_path_prefix is set (see infra/bicep/modules/table-access.bicep).
  blobs          = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
  path_condition = "((!(ActionMatches{'${local.blobs}/read'} AND NOT SubOperationMatches{'Blob.List'}) AND !(ActionMatches{'${local.blobs}/write'}) AND !(ActionMatches{'${local.blobs}/delete'}) AND !(ActionMatches{'${local.blobs}/add/action'}) AND !(ActionMatches{'${local.blobs}/move/action'})) OR (@Resource[${local.blobs}:path] StringStartsWith '${var.table_path_prefix}')) AND ((!(ActionMatches{'${local.blobs}/read'} AND SubOperationMatches{'Blob.List'})) OR (@Request[${local.blobs}:prefix] StringStartsWith '${var.table_path_prefix}'))"
}

resource "azurerm_resource_group" "app" {
  name     = var.resource_group_name
  location = var.location
  tags     = local.tags
}

resource "azurerm_user_assigned_identity" "app" {
  name                = "id-deltaextras-${local.suffix}"
  resource_group_name = azurerm_resource_group.app.name
  location            = azurerm_resource_group.app.location
  tags                = local.tags
}

# ---------------------------------------------------------------------------------------------
# The app's own storage: deployment container, host state, work queue and poison queue.
# ---------------------------------------------------------------------------------------------

resource "azurerm_storage_account" "app" {
  #checkov:skip=CKV_AZURE_59: Flex Consumption without VNet integration reaches its storage over the public endpoint; every request is Entra ID authenticated (shared key disabled) and authorised per queue or container.
  #checkov:skip=CKV_AZURE_35: Same as CKV_AZURE_59: the function app is not a trusted service for the firewall bypass, so the default action must stay Allow without VNet integration.
  #checkov:skip=CKV2_AZURE_33: Private endpoints need VNet integration, which is opt-in (docs/deploy.md); access is identity-only.
  #checkov:skip=CKV_AZURE_206: Holds only transient queue messages, host leases and the deployment package, all recreated by the next run or deploy; LRS is enough.
  #checkov:skip=CKV2_AZURE_1: Microsoft-managed keys (plus infrastructure encryption); no customer data is stored here, only queue messages naming partitions and the app package.
  #checkov:skip=CKV_AZURE_33: Classic Storage Analytics queue logging needs shared-key access; queue writes and deletes go to Log Analytics through azurerm_monitor_diagnostic_setting.queue instead.
  name                = "stdx${local.suffix}"
  resource_group_name = azurerm_resource_group.app.name
  location            = azurerm_resource_group.app.location
  tags                = local.tags

  account_kind                      = "StorageV2"
  account_tier                      = "Standard"
  account_replication_type          = "LRS"
  min_tls_version                   = "TLS1_2"
  https_traffic_only_enabled        = true
  allow_nested_items_to_be_public   = false
  shared_access_key_enabled         = false
  default_to_oauth_authentication   = true
  cross_tenant_replication_enabled  = false
  local_user_enabled                = false
  infrastructure_encryption_enabled = true
  public_network_access_enabled     = true

  sas_policy {
    expiration_period = "01.00:00:00"
  }

  blob_properties {
    delete_retention_policy {
      days = 7
    }
    container_delete_retention_policy {
      days = 7
    }
  }
}

resource "azurerm_storage_container" "deployment" {
  #checkov:skip=CKV2_AZURE_21: Storage Insights (azurerm_log_analytics_storage_insights) needs an account key and shared-key access is disabled; the container holds only the app package.
  name                  = "app-package"
  storage_account_id    = azurerm_storage_account.app.id
  container_access_type = "private"
}

# One message per partition (base64 JSON), written by the orchestrator, read by the worker.
resource "azurerm_storage_queue" "work" {
  name               = var.queue_name
  storage_account_id = azurerm_storage_account.app.id
}

# Messages that failed maxDequeueCount (host.json) times, or that the worker rejected.
resource "azurerm_storage_queue" "poison" {
  name               = local.poison_queue_name
  storage_account_id = azurerm_storage_account.app.id
}

# ---------------------------------------------------------------------------------------------
# Function app
# ---------------------------------------------------------------------------------------------

resource "azurerm_service_plan" "app" {
  #checkov:skip=CKV_AZURE_225: Hourly batch work: a zone outage delays partitions, the queue keeps and retries them; Flex Consumption zone redundancy exists only in some regions.
  #checkov:skip=CKV_AZURE_212: Serverless plan that scales from zero; instances exist only while partitions are queued.
  #checkov:skip=CKV_AZURE_211: FC1 (Flex Consumption) is the chosen plan: per-execution billing for an hourly batch; there is no larger SKU of it.
  name                = "plan-deltaextras-${local.suffix}"
  resource_group_name = azurerm_resource_group.app.name
  location            = azurerm_resource_group.app.location
  tags                = local.tags
  os_type             = "Linux"
  sku_name            = "FC1"
}

# The site is declared with azapi (the same body as infra/bicep/modules/functionapp.bicep):
# azurerm_function_app_flex_consumption injects an AzureWebJobsStorage connection string with an
# empty key when the deployment container is read with a managed identity (azurerm issue 29693),
# and the host then fails to start. On Flex Consumption the runtime comes from
# functionAppConfig.runtime and the host is always ~4: FUNCTIONS_WORKER_RUNTIME is rejected there
# and FUNCTIONS_EXTENSION_VERSION ignored, so neither is set.
resource "azapi_resource" "function_app" {
  type      = "Microsoft.Web/sites@2024-04-01"
  name      = "func-deltaextras-${local.suffix}"
  parent_id = azurerm_resource_group.app.id
  location  = azurerm_resource_group.app.location
  tags      = local.tags

  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.app.id]
  }

  body = {
    kind = "functionapp,linux"
    properties = {
      serverFarmId = azurerm_service_plan.app.id
      httpsOnly    = true
      siteConfig = {
        minTlsVersion    = "1.2"
        scmMinTlsVersion = "1.2"
        ftpsState        = "Disabled"
        http20Enabled    = true
        # Every app setting the code reads (deltaextras.settings, platform "azure") plus the
        # host's own. tests/test_infra.py evaluates this list and fails when a setting is missing.
        appSettings = [
          # Functions host: identity-based AzureWebJobsStorage (no connection string, shared key off).
          { name = "AzureWebJobsStorage__accountName", value = azurerm_storage_account.app.name },
          { name = "AzureWebJobsStorage__credential", value = "managedidentity" },
          { name = "AzureWebJobsStorage__clientId", value = azurerm_user_assigned_identity.app.client_id },
          { name = "APPLICATIONINSIGHTS_CONNECTION_STRING", value = azurerm_application_insights.app.connection_string },
          { name = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING", value = "ClientId=${azurerm_user_assigned_identity.app.client_id};Authorization=AAD" },
          # deltaextras
          { name = "DELTAEXTRAS_TABLES", value = var.deltaextras_tables },
          { name = "DELTAEXTRAS_QUEUE", value = azurerm_storage_queue.work.name },
          { name = "DELTAEXTRAS_POISON_QUEUE", value = azurerm_storage_queue.poison.name },
          { name = "DELTAEXTRAS_SCHEDULE", value = var.schedule },
          { name = "DELTAEXTRAS_STORAGE__queueServiceUri", value = azurerm_storage_account.app.primary_queue_endpoint },
          { name = "DELTAEXTRAS_STORAGE__credential", value = "managedidentity" },
          { name = "DELTAEXTRAS_STORAGE__clientId", value = azurerm_user_assigned_identity.app.client_id },
          { name = "DELTAEXTRAS_STORAGE_OPTIONS", value = var.storage_options },
          { name = "AZURE_CLIENT_ID", value = azurerm_user_assigned_identity.app.client_id },
        ]
      }
      functionAppConfig = {
        deployment = {
          storage = {
            type  = "blobContainer"
            value = "${azurerm_storage_account.app.primary_blob_endpoint}${azurerm_storage_container.deployment.name}"
            authentication = {
              type                           = "UserAssignedIdentity"
              userAssignedIdentityResourceId = azurerm_user_assigned_identity.app.id
            }
          }
        }
        scaleAndConcurrency = {
          instanceMemoryMB     = var.instance_memory_mb
          maximumInstanceCount = var.maximum_instance_count
        }
        runtime = {
          name    = "python"
          version = var.python_version
        }
      }
    }
  }

  response_export_values = ["properties.defaultHostName"]

  depends_on = [
    azurerm_role_assignment.host_blob_owner,
    azurerm_role_assignment.work_queue,
    azurerm_role_assignment.poison_queue,
    azurerm_role_assignment.table_container,
    azurerm_role_assignment.telemetry,
  ]
}

# ---------------------------------------------------------------------------------------------
# Role assignments for the app's identity (scopes as narrow as the data plane allows).
# ---------------------------------------------------------------------------------------------

# The host keeps its state in containers it creates itself (azure-webjobs-hosts, -secrets) and
# reads the deployment container: Blob Data Owner on the app's own account.
resource "azurerm_role_assignment" "host_blob_owner" {
  scope                = azurerm_storage_account.app.id
  role_definition_name = "Storage Blob Data Owner"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
  principal_type       = "ServicePrincipal"
}

# Send (orchestrator), read/delete (worker trigger), on the work queue only.
resource "azurerm_role_assignment" "work_queue" {
  scope                = "${azurerm_storage_account.app.id}/queueServices/default/queues/${azurerm_storage_queue.work.name}"
  role_definition_name = "Storage Queue Data Contributor"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
  principal_type       = "ServicePrincipal"
}

# The host moves poisoned messages here ("create if not exists" + add); the worker sends
# permanent failures here. The poison queue only.
resource "azurerm_role_assignment" "poison_queue" {
  scope                = "${azurerm_storage_account.app.id}/queueServices/default/queues/${azurerm_storage_queue.poison.name}"
  role_definition_name = "Storage Queue Data Contributor"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
  principal_type       = "ServicePrincipal"
}

# The Delta table: blob data rights on its container only (optionally narrowed to a prefix).
resource "azurerm_role_assignment" "table_container" {
  scope                = local.table_container_scope
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
  principal_type       = "ServicePrincipal"
  description          = var.table_path_prefix == "" ? "deltaextras: Delta table container" : "deltaextras: Delta tables under ${var.table_path_prefix}"
  condition            = var.table_path_prefix == "" ? null : local.path_condition
  condition_version    = var.table_path_prefix == "" ? null : "2.0"
}

# Telemetry with Entra ID authentication (local auth is disabled on Application Insights).
resource "azurerm_role_assignment" "telemetry" {
  scope                = azurerm_application_insights.app.id
  role_definition_name = "Monitoring Metrics Publisher"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
  principal_type       = "ServicePrincipal"
}
