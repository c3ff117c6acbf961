# Work queue (one message per partition) and its dead-letter queue.
#
# A message that fails max_receive_count deliveries moves to the DLQ by the redrive policy; the
# worker also sends permanent failures there itself (and reports them as processed). The
# visibility timeout is 6x the worker's timeout, as AWS recommends for Lambda event sources, so
# a message in flight is not delivered twice while its invocation (and retries) may still run.

resource "aws_sqs_queue" "dlq" {
  name                      = "${var.queue_name}-dlq"
  message_retention_seconds = 1209600 # 14 days, the maximum: time to inspect and redrive
  sqs_managed_sse_enabled   = true
}

resource "aws_sqs_queue" "work" {
  name                       = var.queue_name
  visibility_timeout_seconds = 6 * var.worker_timeout_seconds
  message_retention_seconds  = 345600 # 4 days
  receive_wait_time_seconds  = 20
  sqs_managed_sse_enabled    = true

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq.arn
    maxReceiveCount     = var.max_receive_count
  })
}

# Only the work queue may use the DLQ (and redrive back into it).
resource "aws_sqs_queue_redrive_allow_policy" "dlq" {
  queue_url = aws_sqs_queue.dlq.id

  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.work.arn]
  })
}
