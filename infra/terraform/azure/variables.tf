# ---------------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------------

variable "subscription_id" {
  description = "Subscription to deploy into; null: ARM_SUBSCRIPTION_ID or the Azure CLI's current subscription."
  type        = string
  default     = null
}

variable "location" {
  description = "Azure region for all resources (must offer the Flex Consumption plan)."
  type        = string
}

variable "resource_group_name" {
  description = "Resource group to create for the app."
  type        = string
  default     = "rg-deltaextras"
}

variable "name_suffix" {
  description = "Short lowercase alphanumeric suffix that makes the global names unique (storage account, function app). Empty: derived from the resource group name and subscription."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[a-z0-9]{0,13}$", var.name_suffix))
    error_message = "name_suffix: at most 13 lowercase letters or digits."
  }
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------------------------
# The Delta table (an existing storage account, usually ADLS Gen2)
# ---------------------------------------------------------------------------------------------

variable "table_storage_account_name" {
  description = "Name of the existing storage account that holds the Delta table(s)."
  type        = string
}

variable "table_storage_resource_group_name" {
  description = "Resource group of the table storage account."
  type        = string
}

variable "table_storage_subscription_id" {
  description = "Subscription of the table storage account; null: the deployment's subscription."
  type        = string
  default     = null
}

variable "table_container_name" {
  description = "Container (file system) holding the Delta table(s); blob data rights are granted on it only."
  type        = string
}

variable "table_path_prefix" {
  description = "Optional path prefix inside the container (e.g. \"warehouse/\"). When set, the role assignment carries an ABAC condition limiting reads, writes, deletes and listings to that prefix."
  type        = string
  default     = ""
}

# ---------------------------------------------------------------------------------------------
# App settings read by the code (deltaextras.settings)
# ---------------------------------------------------------------------------------------------

variable "deltaextras_tables" {
  description = "DELTAEXTRAS_TABLES (required): JSON list of tables to maintain; also the worker's allow-list."
  type        = string

  validation {
    condition     = can(tolist(jsondecode(var.deltaextras_tables)))
    error_message = "deltaextras_tables must be a JSON list."
  }
}

variable "queue_name" {
  description = "DELTAEXTRAS_QUEUE: work queue name. The poison queue is <queue_name>-poison (the Functions host's convention)."
  type        = string
  default     = "deltaextras-rorder"
}

variable "schedule" {
  description = "DELTAEXTRAS_SCHEDULE: orchestrator timer, NCRONTAB with seconds."
  type        = string
  default     = "0 0 * * * *"
}

variable "storage_options" {
  description = "DELTAEXTRAS_STORAGE_OPTIONS: JSON object of extra storage options for the tables; prefer the managed identity to secrets here."
  type        = string
  default     = "{}"

  validation {
    condition     = can(keys(jsondecode(var.storage_options)))
    error_message = "storage_options must be a JSON object."
  }
}

# ---------------------------------------------------------------------------------------------
# Sizing and operations
# ---------------------------------------------------------------------------------------------

variable "instance_memory_mb" {
  description = "Flex Consumption instance memory (MB); each instance rewrites one partition at a time."
  type        = number
  default     = 2048

  validation {
    condition     = contains([2048, 4096], var.instance_memory_mb)
    error_message = "instance_memory_mb: 2048 or 4096."
  }
}

variable "maximum_instance_count" {
  description = "Upper bound on instances, i.e. on partitions rewritten at once."
  type        = number
  default     = 40
}

variable "python_version" {
  description = "Python version of the function app."
  type        = string
  default     = "3.12"
}

variable "log_retention_days" {
  description = "Log Analytics retention in days."
  type        = number
  default     = 30
}

variable "alert_email" {
  description = "E-mail notified when a message lands in the poison queue; empty: no action group (the alert still fires in Azure Monitor)."
  type        = string
  default     = ""
}
