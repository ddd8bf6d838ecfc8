# A module that declares none of the contract inputs (SPEC K6): the runner's
# captf-contract.auto.tfvars.json gives it values for variables it does not
# declare, which Terraform and OpenTofu must ignore (with a warning), not
# refuse. Built-in pieces only: no provider is downloaded.

variable "greeting" {
  type        = string
  description = "A spec.variables value (CAPTF_VARIABLES, SPEC T3)."
}

resource "terraform_data" "thing" {
  input = var.greeting
}

output "greeting" {
  value = terraform_data.thing.output
}
