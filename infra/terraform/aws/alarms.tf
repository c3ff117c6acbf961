# Alarms: the dead-letter queue is not empty; the orchestrator failed.

resource "aws_sns_topic" "alarms" {
  #checkov:skip=CKV_AWS_26: CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS key, and the topic carries only alarm state changes (no table data).
  count = var.alarm_email == "" ? 0 : 1
  name  = "${var.name_prefix}-alarms"
}

resource "aws_sns_topic_subscription" "alarm_email" {
  count     = var.alarm_email == "" ? 0 : 1
  topic_arn = aws_sns_topic.alarms[0].arn
  protocol  = "email"
  endpoint  = var.alarm_email
}

resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  alarm_name          = "${var.name_prefix}-dlq-not-empty"
  alarm_description   = "Partitions that failed ${var.max_receive_count} times, or that the worker rejected as permanent failures, wait in ${aws_sqs_queue.dlq.name}. Inspect them, fix the cause, then redrive them to ${aws_sqs_queue.work.name} or delete them."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dlq.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = aws_sns_topic.alarms[*].arn
  ok_actions          = aws_sns_topic.alarms[*].arn
}

resource "aws_cloudwatch_metric_alarm" "orchestrator_errors" {
  alarm_name          = "${var.name_prefix}-orchestrator-errors"
  alarm_description   = "The deltaextras orchestrator failed; no partitions were planned for that run."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.orchestrator.function_name }
  statistic           = "Sum"
  period              = 3600
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = aws_sns_topic.alarms[*].arn
}
