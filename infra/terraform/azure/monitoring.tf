resource "azurerm_log_analytics_workspace" "app" {
  name                = "log-deltaextras-${local.suffix}"
  resource_group_name = azurerm_resource_group.app.name
  location            = azurerm_resource_group.app.location
  tags                = local.tags
  sku                 = "PerGB2018"
  retention_in_days   = var.log_retention_days
}

resource "azurerm_application_insights" "app" {
  name                          = "appi-deltaextras-${local.suffix}"
  resource_group_name           = azurerm_resource_group.app.name
  location                      = azurerm_resource_group.app.location
  tags                          = local.tags
  application_type              = "web"
  workspace_id                  = azurerm_log_analytics_workspace.app.id
  local_authentication_disabled = true
}

# Azure Storage publishes queue metrics per account only (no per-queue dimension), so the
# "poison queue not empty" alert is a log search over the queue service's write and delete
# logs (reads are left out: the trigger's polling would dominate the volume).
resource "azurerm_monitor_diagnostic_setting" "queue" {
  name                       = "queue-writes-to-log-analytics"
  target_resource_id         = "${azurerm_storage_account.app.id}/queueServices/default"
  log_analytics_workspace_id = azurerm_log_analytics_workspace.app.id

  enabled_log {
    category = "StorageWrite"
  }

  enabled_log {
    category = "StorageDelete"
  }
}

resource "azurerm_monitor_action_group" "ops" {
  count               = var.alert_email == "" ? 0 : 1
  name                = "deltaextras-ops-${local.suffix}"
  resource_group_name = azurerm_resource_group.app.name
  short_name          = "deltaextras"
  tags                = local.tags

  email_receiver {
    name                    = "ops"
    email_address           = var.alert_email
    use_common_alert_schema = true
  }
}

locals {
  poison_key = "/${azurerm_storage_account.app.name}/${local.poison_queue_name}/"
  # Messages put into the poison queue minus messages deleted from it, since the last clear.
  pending_poison_query = <<-KQL
    let poison = StorageQueueLogs
        | where AccountName == '${azurerm_storage_account.app.name}' and ObjectKey startswith '${local.poison_key}';
    let cleared = toscalar(poison | where OperationName == 'ClearMessages' | summarize max(TimeGenerated));
    poison
    | where isnull(cleared) or TimeGenerated > cleared
    | summarize Added = countif(OperationName == 'PutMessage'), Removed = countif(OperationName == 'DeleteMessage')
    | extend Pending = Added - Removed
    | where Pending > 0
  KQL
}

resource "azurerm_monitor_scheduled_query_rules_alert_v2" "poison_queue" {
  name                = "deltaextras-${local.suffix}-poison-queue-not-empty"
  resource_group_name = azurerm_resource_group.app.name
  location            = azurerm_resource_group.app.location
  tags                = local.tags
  display_name        = "deltaextras: poison queue ${local.poison_queue_name} is not empty"
  description         = "Partitions that failed 5 times, or that the worker rejected as permanent failures, wait in ${local.poison_queue_name}. Inspect them, fix the cause, then move them back to the work queue or delete them."
  severity            = 2
  enabled             = true

  scopes               = [azurerm_log_analytics_workspace.app.id]
  evaluation_frequency = "PT1H"
  window_duration      = "P2D"
  # StorageQueueLogs exists in the workspace only after the first log arrives.
  skip_query_validation   = true
  auto_mitigation_enabled = true

  criteria {
    query                   = local.pending_poison_query
    time_aggregation_method = "Count"
    operator                = "GreaterThan"
    threshold               = 0

    failing_periods {
      number_of_evaluation_periods             = 1
      minimum_failing_periods_to_trigger_alert = 1
    }
  }

  action {
    action_groups = azurerm_monitor_action_group.ops[*].id
  }

  depends_on = [azurerm_monitor_diagnostic_setting.queue]
}
