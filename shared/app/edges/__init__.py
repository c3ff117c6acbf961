"""Cloud edges: the only modules that import cloud SDKs (azure-*, boto3). The core never imports them."""
