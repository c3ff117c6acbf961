# Two functions from one container image (pyarrow + deltalake + obstore exceed the 250 MB
# unzipped limit of zip packages); image_config.command picks the handler.

locals {
  # Every app setting the code reads (deltaextras.settings, platform "aws"), for both functions.
  # tests/test_infra.py fails when a setting is missing.
  lambda_environment = {
    DELTAEXTRAS_TABLES          = var.deltaextras_tables
    DELTAEXTRAS_QUEUE           = aws_sqs_queue.work.name
    DELTAEXTRAS_QUEUE_URL       = aws_sqs_queue.work.url
    DELTAEXTRAS_DLQ_URL         = aws_sqs_queue.dlq.url
    DELTAEXTRAS_STORAGE_OPTIONS = var.storage_options
  }
}

resource "aws_cloudwatch_log_group" "orchestrator" {
  #checkov:skip=CKV_AWS_158: CloudWatch Logs encrypts at rest by default; the logs hold partition values and timings, no secrets, and a customer key would add a key policy for the logs service.
  name              = "/aws/lambda/${var.name_prefix}-orchestrator"
  retention_in_days = var.log_retention_days
}

resource "aws_cloudwatch_log_group" "worker" {
  #checkov:skip=CKV_AWS_158: CloudWatch Logs encrypts at rest by default; the logs hold partition values and timings, no secrets, and a customer key would add a key policy for the logs service.
  name              = "/aws/lambda/${var.name_prefix}-worker"
  retention_in_days = var.log_retention_days
}

resource "aws_lambda_function" "orchestrator" {
  #checkov:skip=CKV_AWS_117: Reaches only S3 and SQS through their public endpoints with IAM auth; a VPC would need NAT or endpoints and buys nothing here.
  #checkov:skip=CKV_AWS_272: Code signing applies to zip packages only; the function runs a container image pinned by image_uri.
  #checkov:skip=CKV_AWS_173: The environment holds the table list and queue URLs, no secrets; Lambda encrypts it at rest with its service key.
  #checkov:skip=CKV_AWS_116: Invoked by the hourly schedule; a failed run is retried by EventBridge/Lambda async retries and the next hour's run, and the errors alarm reports it.
  function_name = "${var.name_prefix}-orchestrator"
  description   = "deltaextras: plans work from the Delta table snapshot, one SQS message per partition"
  role          = aws_iam_role.orchestrator.arn
  package_type  = "Image"
  image_uri     = var.image_uri
  architectures = [var.architecture]
  memory_size   = var.orchestrator_memory_mb
  timeout       = var.orchestrator_timeout_seconds

  reserved_concurrent_executions = var.orchestrator_reserved_concurrency

  image_config {
    command = ["lambda_handlers.orchestrator_handler"]
  }

  environment {
    variables = local.lambda_environment
  }

  tracing_config {
    mode = "Active"
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.orchestrator.name
  }

  depends_on = [aws_iam_role_policy.orchestrator]
}

resource "aws_lambda_function" "worker" {
  #checkov:skip=CKV_AWS_117: Reaches only S3 and SQS through their public endpoints with IAM auth; a VPC would need NAT or endpoints and buys nothing here.
  #checkov:skip=CKV_AWS_272: Code signing applies to zip packages only; the function runs a container image pinned by image_uri.
  #checkov:skip=CKV_AWS_173: The environment holds the table list and queue URLs, no secrets; Lambda encrypts it at rest with its service key.
  #checkov:skip=CKV_AWS_116: Invoked synchronously by the SQS event source mapping, where a function DLQ never applies; failed messages go to the work queue's redrive DLQ.
  function_name = "${var.name_prefix}-worker"
  description   = "deltaextras: rewrites one partition per SQS message and commits"
  role          = aws_iam_role.worker.arn
  package_type  = "Image"
  image_uri     = var.image_uri
  architectures = [var.architecture]
  memory_size   = var.worker_memory_mb
  timeout       = var.worker_timeout_seconds

  reserved_concurrent_executions = coalesce(var.worker_reserved_concurrency, var.worker_max_concurrency)

  ephemeral_storage {
    size = var.worker_ephemeral_storage_mb
  }

  image_config {
    command = ["lambda_handlers.worker_handler"]
  }

  environment {
    variables = local.lambda_environment
  }

  tracing_config {
    mode = "Active"
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.worker.name
  }

  depends_on = [aws_iam_role_policy.worker]
}

# One message per invocation; failed messages are reported individually (the handler returns
# batchItemFailures) so SQS redelivers only those, up to max_receive_count, then to the DLQ.
resource "aws_lambda_event_source_mapping" "worker" {
  event_source_arn        = aws_sqs_queue.work.arn
  function_name           = aws_lambda_function.worker.arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.worker_max_concurrency
  }
}

# ---------------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------------

resource "aws_cloudwatch_event_rule" "orchestrator" {
  name                = "${var.name_prefix}-orchestrator-schedule"
  description         = "deltaextras: run the orchestrator"
  schedule_expression = var.schedule_expression
}

resource "aws_cloudwatch_event_target" "orchestrator" {
  rule = aws_cloudwatch_event_rule.orchestrator.name
  arn  = aws_lambda_function.orchestrator.arn

  retry_policy {
    maximum_event_age_in_seconds = 3600
    maximum_retry_attempts       = 2
  }
}

resource "aws_lambda_permission" "schedule" {
  statement_id  = "AllowEventBridgeSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.orchestrator.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.orchestrator.arn
}
