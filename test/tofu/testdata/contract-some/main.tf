# A machine module that declares some of the contract inputs (SPEC K6), with
# the types pkg/contract renders, and leaves the others undeclared.
# bootstrap_data is declared sensitive, as module authors should: Terraform
# then never prints it (SPEC K5, X1). Built-in pieces only.

variable "greeting" {
  type        = string
  description = "A spec.variables value (CAPTF_VARIABLES, SPEC T3)."
}

variable "machine_name" {
  type = string
}

variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "bootstrap_format" {
  type    = string
  default = "cloud-config"
}

variable "control_plane" {
  type    = bool
  default = false
}

variable "captf_tags" {
  type    = map(string)
  default = {}
}

variable "captf_cluster_outputs" {
  type    = any
  default = {}
}

# What a real module would hand its compute instance: the bootstrap data
# rides in a resource argument, so plan, apply and destroy show it (or not).
# Not in input: terraform_data copies input to its computed output, which
# Terraform does not know is sensitive, and the destroy plan printed it
# (Terraform v1.13.3). triggers_replace is copied nowhere.
resource "terraform_data" "machine" {
  input = {
    name   = var.machine_name
    format = var.bootstrap_format
    tags   = var.captf_tags
  }
  triggers_replace = {
    user_data = var.bootstrap_data
  }
}

output "machine_name" {
  value = var.machine_name
}

output "control_plane" {
  value = var.control_plane
}

output "cluster_tag" {
  value = var.captf_tags["cluster"]
}

output "vpc_id" {
  value = var.captf_cluster_outputs.vpc_id
}

# Proves the bootstrap data arrived intact without printing it.
output "bootstrap_data_sha256" {
  value = nonsensitive(sha256(var.bootstrap_data))
}
