variable "aws_region" {
  description = "Region to deploy into; null: AWS_REGION or the profile's region. Use the table bucket's region."
  type        = string
  default     = null
}

variable "name_prefix" {
  description = "Prefix of the Lambda functions, roles, log groups, alarms."
  type        = string
  default     = "deltaextras"
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------------------------
# Code: one container image (lambda/Dockerfile) for both functions
# ---------------------------------------------------------------------------------------------

variable "image_uri" {
  description = "ECR image URI (repository:tag or @digest) built from lambda/Dockerfile; both functions run it with a different handler."
  type        = string
}

variable "architecture" {
  description = "Instruction set of the image: x86_64 or arm64."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture: x86_64 or arm64."
  }
}

# ---------------------------------------------------------------------------------------------
# The Delta table(s)
# ---------------------------------------------------------------------------------------------

variable "table_bucket" {
  description = "S3 bucket that holds the Delta table(s). The functions get rights on this bucket only."
  type        = string
}

variable "table_prefix" {
  description = "Key prefix of the table(s) in the bucket (e.g. \"warehouse/\"); empty: the whole bucket. Rights are limited to keys under it."
  type        = string
  default     = ""
}

variable "table_kms_key_arn" {
  description = "KMS key the bucket encrypts with (SSE-KMS with a customer key); empty: none needed (SSE-S3 or the AWS-managed key)."
  type        = string
  default     = ""
}

# ---------------------------------------------------------------------------------------------
# App settings read by the code (deltaextras.settings)
# ---------------------------------------------------------------------------------------------

variable "deltaextras_tables" {
  description = "DELTAEXTRAS_TABLES (required): JSON list of tables to maintain (s3:// URIs); also the worker's allow-list."
  type        = string

  validation {
    condition     = can(tolist(jsondecode(var.deltaextras_tables)))
    error_message = "deltaextras_tables must be a JSON list."
  }
}

variable "queue_name" {
  description = "DELTAEXTRAS_QUEUE: SQS work queue name. The dead-letter queue is <queue_name>-dlq."
  type        = string
  default     = "deltaextras-rorder"
}

variable "storage_options" {
  description = "DELTAEXTRAS_STORAGE_OPTIONS: JSON object of extra storage options; the functions' role credentials are used without any."
  type        = string
  default     = "{}"

  validation {
    condition     = can(keys(jsondecode(var.storage_options)))
    error_message = "storage_options must be a JSON object."
  }
}

# ---------------------------------------------------------------------------------------------
# Schedule, sizing, retries
# ---------------------------------------------------------------------------------------------

variable "schedule_expression" {
  description = "EventBridge schedule of the orchestrator (hourly, like DELTAEXTRAS_SCHEDULE's default on Azure)."
  type        = string
  default     = "cron(0 * * * ? *)"
}

variable "orchestrator_memory_mb" {
  description = "Orchestrator memory (MB); it reads the table snapshot and sends one message per partition."
  type        = number
  default     = 1024
}

variable "orchestrator_timeout_seconds" {
  description = "Orchestrator timeout (s)."
  type        = number
  default     = 300
}

variable "orchestrator_reserved_concurrency" {
  description = "Reserved concurrency of the orchestrator; 1 keeps two runs from overlapping. -1 (unreserved) in accounts whose concurrency quota is too small to reserve any."
  type        = number
  default     = 1
}

variable "worker_memory_mb" {
  description = "Worker memory (MB); Lambda's CPU share grows with it. One partition rewrite per invocation."
  type        = number
  default     = 2048

  validation {
    condition     = var.worker_memory_mb >= 512 && var.worker_memory_mb <= 10240
    error_message = "worker_memory_mb: 512 to 10240."
  }
}

variable "worker_ephemeral_storage_mb" {
  description = "Worker /tmp size (MB)."
  type        = number
  default     = 2048
}

variable "worker_timeout_seconds" {
  description = "Worker timeout (s). The work queue's visibility timeout is 6x this value."
  type        = number
  default     = 600

  validation {
    condition     = var.worker_timeout_seconds >= 60 && var.worker_timeout_seconds <= 900
    error_message = "worker_timeout_seconds: 60 to 900 (Lambda's limit)."
  }
}

variable "worker_max_concurrency" {
  description = "Most partitions rewritten at once (SQS event source maximum concurrency, 2 to 1000)."
  type        = number
  default     = 10

  validation {
    condition     = var.worker_max_concurrency >= 2 && var.worker_max_concurrency <= 1000
    error_message = "worker_max_concurrency: 2 to 1000."
  }
}

variable "worker_reserved_concurrency" {
  description = "Reserved concurrency of the worker; null: worker_max_concurrency. -1 (unreserved) in accounts whose concurrency quota is too small to reserve it."
  type        = number
  default     = null
}

variable "max_receive_count" {
  description = "Deliveries of a message before SQS moves it to the dead-letter queue (the Azure side's maxDequeueCount)."
  type        = number
  default     = 5
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention of the functions' log groups."
  type        = number
  default     = 365
}

variable "alarm_email" {
  description = "E-mail subscribed to the alarms (dead-letter queue not empty, orchestrator errors); empty: alarms without notification."
  type        = string
  default     = ""
}
