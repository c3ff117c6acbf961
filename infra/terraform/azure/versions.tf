terraform {
  required_version = ">= 1.5.0"

  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # 4.47+: azurerm_storage_queue and azurerm_storage_container by storage_account_id
      # (management plane, so no shared key is needed).
      version = ">= 4.47.0, < 5.0.0"
    }
    azapi = {
      source = "Azure/azapi"
      # The function app itself: azurerm_function_app_flex_consumption writes an
      # AzureWebJobsStorage connection string without a key when the deployment container uses a
      # managed identity (hashicorp/terraform-provider-azurerm#29693), which stops the host.
      version = ">= 2.0.0, < 3.0.0"
    }
  }
}

provider "azurerm" {
  features {
    storage {
      # The app storage account has shared-key access disabled: manage it through Azure Resource
      # Manager only (queues and the container are created by storage_account_id).
      data_plane_available = false
    }
  }

  # null: taken from ARM_SUBSCRIPTION_ID / the Azure CLI login.
  subscription_id = var.subscription_id

  storage_use_azuread = true
}

provider "azapi" {
  subscription_id = var.subscription_id
}
