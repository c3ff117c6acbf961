output "work_queue_url" {
  description = "DELTAEXTRAS_QUEUE_URL."
  value       = aws_sqs_queue.work.url
}

output "dlq_url" {
  description = "DELTAEXTRAS_DLQ_URL."
  value       = aws_sqs_queue.dlq.url
}

output "orchestrator_function_name" {
  description = "Invoke it by hand: aws lambda invoke --function-name <name> out.json"
  value       = aws_lambda_function.orchestrator.function_name
}

output "worker_function_name" {
  description = "The worker Lambda function."
  value       = aws_lambda_function.worker.function_name
}
