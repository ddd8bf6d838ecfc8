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
# rides in a resource argument, so plan and apply show it (or not).
resource "terraform_data" "machine" {
  input = {
    name      = var.machine_name
    user_data = var.bootstrap_data
    format    = var.bootstrap_format
    tags      = var.captf_tags
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
