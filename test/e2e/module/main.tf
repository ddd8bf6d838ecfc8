# The test module of the end-to-end test and of the runner proof (issues 11
# and 12). It creates one resource in the fake cloud (test/fakecloud) on
# apply and deletes it on destroy, with nothing but built-in pieces: no
# provider is downloaded, no shell is needed (local-exec runs the static
# fakecloud-client directly through `interpreter`).
#
# It declares no backend: captf's runner injects the kubernetes backend (SPEC
# T2) and writes the inputs as a *.auto.tfvars.json (T3). By hand:
#
#   FAKECLOUD_TOKEN=... tofu apply -var name=demo -var fakecloud_endpoint=http://127.0.0.1:8080
#
# The credential reaches the client both ways a captf Job delivers it (J2):
# the create call takes it from the environment variable FAKECLOUD_TOKEN, the
# check right after it and the delete on destroy from the mounted file
# /var/run/captf/credentials/FAKECLOUD_TOKEN. The fake cloud's /seen records
# which source each call used.
#
# As a TerraformMachine's module (SPEC K5, K6) it reads the contract inputs
# machine_name (the resource's name when `name` is not set), bootstrap_data
# and bootstrap_format, and sends the bootstrap data with the create, as a
# cloud's instance takes its user data; it outputs provider_id and
# addresses (K7). A cluster ignores those outputs, a machine the endpoint.

terraform {
  required_version = ">= 1.6.0"
}

variable "name" {
  type        = string
  default     = ""
  description = "Name of the fake-cloud resource; machine_name when empty."
}

# Contract inputs (SPEC K6): the runner sets them for a TerraformMachine
# that Cluster API owns.
variable "machine_name" {
  type        = string
  default     = ""
  description = "The Machine's name (contract input)."
}

variable "bootstrap_data" {
  type        = string
  default     = ""
  sensitive   = true
  description = "The Machine's bootstrap data, base64 (contract input, SPEC K5): sent with the create."
}

variable "bootstrap_format" {
  type        = string
  default     = ""
  description = "The bootstrap data's format (contract input)."
}

variable "fakecloud_endpoint" {
  type        = string
  description = "URL of the fake cloud, e.g. http://fakecloud.fakecloud.svc:8080."
}

variable "namespace" {
  type        = string
  default     = ""
  description = "Mixed into the resource id so equal names in two namespaces do not collide."
}

variable "client" {
  type        = string
  default     = "fakecloud-client"
  description = "The fakecloud-client executable: a path, or a name looked up in PATH."
}

variable "credential_file" {
  type        = string
  default     = "/var/run/captf/credentials/FAKECLOUD_TOKEN"
  description = "The credential file (where a captf Job mounts the key FAKECLOUD_TOKEN)."
}

variable "rotation_wait_seconds" {
  type        = number
  default     = 0
  description = "If above 0, apply waits up to this long for the credential file to be rotated (SPEC R3 probe)."
}

variable "fail_plan" {
  type        = string
  default     = ""
  description = "If set, the plan fails on this variable's validation: the e2e's failing run (SPEC O1)."

  validation {
    condition     = var.fail_plan == ""
    error_message = "The e2e module refuses to plan while fail_plan is set."
  }
}

variable "credential_check" {
  type        = string
  default     = ""
  description = "If set, each new value runs one whoami with the credential from the environment and one with the file: how a test sees which credential a later Job used (SPEC J2, R3)."
}

variable "credential_checks" {
  type        = list(string)
  default     = []
  description = "Like credential_check, one check per value; a value added to the list runs its checks and replaces or deletes nothing, so a cluster's guarded apply (SPEC O8's destructive guard) lets it through."
}

locals {
  # Deterministic, so the id is known before the resource exists and lands in
  # the state through terraform_data's input/output: no provider needed to
  # read anything back.
  name = var.name != "" ? var.name : var.machine_name
  id   = "r-${substr(sha256("${var.namespace}/${local.name}"), 0, 16)}"
}

resource "terraform_data" "resource" {
  # A new id is a new resource; other inputs only update what the destroy
  # provisioner will use.
  triggers_replace = local.id

  input = {
    id              = local.id
    name            = local.name
    endpoint        = var.fakecloud_endpoint
    client          = var.client
    credential_file = var.credential_file
  }

  # local-exec runs interpreter + [command]: the last flag's value is the command.
  # The bootstrap data goes through the environment, never the arguments
  # (local-exec prints those); it is not in the state's input either, so
  # a new join token does not replace the resource (SPEC K5: a machine
  # keeps what it was provisioned with).
  provisioner "local-exec" {
    interpreter = [self.input.client, "create", "--id", self.input.id, "--name", self.input.name,
      "--endpoint", self.input.endpoint, "--bootstrap-data-env", "FAKECLOUD_BOOTSTRAP_DATA",
    "--bootstrap-format", var.bootstrap_format, "--credential-source"]
    command     = "env"
    environment = { FAKECLOUD_BOOTSTRAP_DATA = var.bootstrap_data }
  }

  provisioner "local-exec" {
    interpreter = [self.input.client, "get", "--id", self.input.id, "--endpoint", self.input.endpoint,
    "--credential-file", self.input.credential_file, "--credential-source"]
    command = "file"
  }

  # A destroy-time provisioner may refer to self only: everything it needs is
  # in the state (self.output).
  provisioner "local-exec" {
    when = destroy
    interpreter = [self.output.client, "delete", "--id", self.output.id, "--missing-ok",
    "--endpoint", self.output.endpoint, "--credential-file", self.output.credential_file, "--credential-source"]
    command = "file"
  }
}

# Each new credential_check value asks the fake cloud who we are, once with
# each delivery path (SPEC J2): an apply with nothing else to change still
# shows which credential its Job had.
resource "terraform_data" "credential_check" {
  count            = var.credential_check != "" ? 1 : 0
  depends_on       = [terraform_data.resource]
  triggers_replace = var.credential_check

  provisioner "local-exec" {
    interpreter = [var.client, "whoami", "--endpoint", var.fakecloud_endpoint, "--credential-source"]
    command     = "env"
  }

  provisioner "local-exec" {
    interpreter = [var.client, "whoami", "--endpoint", var.fakecloud_endpoint, "--credential-file", var.credential_file, "--credential-source"]
    command     = "file"
  }
}

# One check per value of credential_checks: adding a value only creates.
resource "terraform_data" "credential_checks" {
  for_each   = toset(var.credential_checks)
  depends_on = [terraform_data.resource]
  input      = each.key

  provisioner "local-exec" {
    interpreter = [var.client, "whoami", "--endpoint", var.fakecloud_endpoint, "--credential-source"]
    command     = "env"
  }

  provisioner "local-exec" {
    interpreter = [var.client, "whoami", "--endpoint", var.fakecloud_endpoint, "--credential-file", var.credential_file, "--credential-source"]
    command     = "file"
  }
}

# SPEC R3 from inside a running Job: waits until the credential file differs
# from the environment's copy and the fake cloud accepts it, then asks once
# with each. Only when rotation_wait_seconds > 0.
resource "terraform_data" "rotation_probe" {
  count      = var.rotation_wait_seconds > 0 ? 1 : 0
  depends_on = [terraform_data.resource]
  input      = var.rotation_wait_seconds

  provisioner "local-exec" {
    interpreter = [var.client, "wait-rotation", "--wait", "${var.rotation_wait_seconds}s",
    "--endpoint", var.fakecloud_endpoint, "--credential-file", var.credential_file, "--interval"]
    command = "2s"
  }
}

output "resource_id" {
  description = "The fake-cloud resource's id."
  value       = terraform_data.resource.output.id
}

output "control_plane_endpoint" {
  description = "What a TerraformCluster takes as spec.controlPlaneEndpoint (SPEC T5)."
  value = {
    host = "${terraform_data.resource.output.id}.fakecloud.test"
    port = 6443
  }
}

output "provider_id" {
  description = "What a TerraformMachine takes as spec.providerID (SPEC T5, K7)."
  value       = "fakecloud:///${terraform_data.resource.output.id}"
}

output "addresses" {
  description = "A TerraformMachine's status.addresses (SPEC K7)."
  value       = [{ type = "InternalDNS", address = "${terraform_data.resource.output.id}.fakecloud.test" }]
}

output "admin_token" {
  description = "A sensitive output: only its name may reach the object's status (SPEC T4, X1)."
  value       = "fake-admin-token-${substr(sha256("admin/${terraform_data.resource.output.id}"), 0, 24)}"
  sensitive   = true
}
