terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.60.0, < 7.0.0"
    }
  }
}

provider "aws" {
  # null: AWS_REGION / the profile's region.
  region = var.aws_region

  default_tags {
    tags = merge({ application = "deltaextras" }, var.tags)
  }
}
