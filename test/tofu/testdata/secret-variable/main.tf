# A module that takes a value a Secret gave (spec.variablesFrom, SPEC O9)
# without declaring the variable sensitive: Terraform prints it in the
# plan, and the runner must keep it out of the pod's log (X1). Built-in
# pieces only.

variable "db_password" {
  type = string
}

variable "region" {
  type = string
}

resource "terraform_data" "db" {
  input = {
    password = var.db_password
    region   = var.region
  }
}
