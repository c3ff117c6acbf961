# Least-privilege roles, one per function. S3 rights cover the table bucket and prefix only; SQS
# rights the two queues only. No DynamoDB: commits use S3 conditional writes (If-None-Match),
# which need s3:PutObject and nothing else.

data "aws_partition" "current" {}

locals {
  table_bucket_arn = "arn:${data.aws_partition.current.partition}:s3:::${var.table_bucket}"
  table_objects    = "${local.table_bucket_arn}/${var.table_prefix}*"
  # After a checkpoint, expired commit files in _delta_log/ may be cleaned up: the only deletes.
  table_log_objects = "${local.table_bucket_arn}/${var.table_prefix}*_delta_log/*"
  table_list_prefix = var.table_prefix == "" ? [] : ["${var.table_prefix}*"]
  table_kms_keys    = var.table_kms_key_arn == "" ? [] : [var.table_kms_key_arn]
}

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

# ---------------------------------------------------------------------------------------------
# Orchestrator: read the table, send to the work queue.
# ---------------------------------------------------------------------------------------------

resource "aws_iam_role" "orchestrator" {
  name               = "${var.name_prefix}-orchestrator"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

data "aws_iam_policy_document" "orchestrator" {
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.orchestrator.arn}:*"]
  }

  statement {
    sid       = "EnqueuePartitions"
    actions   = ["sqs:SendMessage", "sqs:GetQueueAttributes"]
    resources = [aws_sqs_queue.work.arn]
  }

  statement {
    sid       = "ListTable"
    actions   = ["s3:ListBucket"]
    resources = [local.table_bucket_arn]

    dynamic "condition" {
      for_each = length(local.table_list_prefix) > 0 ? [1] : []
      content {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = local.table_list_prefix
      }
    }
  }

  statement {
    sid       = "ReadTable"
    actions   = ["s3:GetObject"]
    resources = [local.table_objects]
  }

  dynamic "statement" {
    for_each = local.table_kms_keys
    content {
      sid       = "DecryptTable"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "orchestrator" {
  name   = "deltaextras-orchestrator"
  role   = aws_iam_role.orchestrator.id
  policy = data.aws_iam_policy_document.orchestrator.json
}

resource "aws_iam_role_policy_attachment" "orchestrator_xray" {
  role       = aws_iam_role.orchestrator.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}

# ---------------------------------------------------------------------------------------------
# Worker: consume the work queue, rewrite partitions, commit; permanent failures to the DLQ.
# ---------------------------------------------------------------------------------------------

resource "aws_iam_role" "worker" {
  name               = "${var.name_prefix}-worker"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.worker.arn}:*"]
  }

  # What the SQS event source mapping needs, on the work queue only.
  statement {
    sid = "ConsumePartitions"
    actions = [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
    ]
    resources = [aws_sqs_queue.work.arn]
  }

  statement {
    sid       = "ReportPermanentFailures"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dlq.arn]
  }

  statement {
    sid       = "ListTable"
    actions   = ["s3:ListBucket"]
    resources = [local.table_bucket_arn]

    dynamic "condition" {
      for_each = length(local.table_list_prefix) > 0 ? [1] : []
      content {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = local.table_list_prefix
      }
    }
  }

  # Read data and log files; write new data files and commits (conditional put), multipart
  # uploads for large files included.
  statement {
    sid       = "ReadWriteTable"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    resources = [local.table_objects]
  }

  statement {
    sid       = "CleanUpExpiredLogFiles"
    actions   = ["s3:DeleteObject"]
    resources = [local.table_log_objects]
  }

  dynamic "statement" {
    for_each = local.table_kms_keys
    content {
      sid       = "EncryptTable"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "worker" {
  name   = "deltaextras-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_role_policy_attachment" "worker_xray" {
  role       = aws_iam_role.worker.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}
