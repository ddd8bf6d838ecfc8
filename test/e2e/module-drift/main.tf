# The drift module of the end-to-end test (issue 24, SPEC O7). Unlike
# test/e2e/module, whose terraform_data resources only call the fake cloud
# from provisioners (a refresh never asks the cloud), its one resource
# comes from the fakecloud provider (hack/tools/fakecloud-provider): a
# refresh reads the resource from the fake cloud (test/fakecloud), so a
# content changed behind the module's back is drift, and a resource
# deleted behind its back leaves the state (the plan creates it again).
#
# The provider is installed from a provider mirror, never from a
# registry: captf.local is a host no registry serves. In the image
# (hack/build-e2e-images.sh) the mirror is /captf/providers, which the
# runner hands OpenTofu as a filesystem_mirror (SPEC O10). By hand:
#
#   hack/build-fakecloud-provider.sh /tmp/mirror
#   cat >/tmp/mirror.tfrc <<<'provider_installation { filesystem_mirror { path = "/tmp/mirror" } }'
#   TF_CLI_CONFIG_FILE=/tmp/mirror.tfrc FAKECLOUD_TOKEN=... tofu init
#   FAKECLOUD_TOKEN=... tofu apply -var name=demo -var fakecloud_endpoint=http://127.0.0.1:8080
#
# The credential: FAKECLOUD_TOKEN from the environment, else the mounted
# file credential_file (SPEC J2). No backend: the runner injects the
# kubernetes backend (T2) and writes the inputs as *.auto.tfvars.json (T3).

terraform {
  required_version = ">= 1.6.0"
  required_providers {
    fakecloud = {
      source  = "captf.local/captf/fakecloud"
      version = "0.1.0"
    }
  }
}

variable "name" {
  type        = string
  description = "Name of the fake-cloud resource."
}

variable "namespace" {
  type        = string
  default     = ""
  description = "Mixed into the resource id so equal names in two namespaces do not collide."
}

variable "content" {
  type        = string
  default     = "as the module says"
  description = "The resource's content: what a test changes behind the module's back."
}

variable "fakecloud_endpoint" {
  type        = string
  description = "URL of the fake cloud, e.g. http://10.0.0.15:8080."
}

variable "credential_file" {
  type        = string
  default     = "/var/run/captf/credentials/FAKECLOUD_TOKEN"
  description = "The credential file when FAKECLOUD_TOKEN is not in the environment (where a captf Job mounts the key)."
}

provider "fakecloud" {
  endpoint        = var.fakecloud_endpoint
  credential_file = var.credential_file
}

resource "fakecloud_resource" "resource" {
  # The same id as test/e2e/module gives a name (test/e2e's moduleID).
  id      = "r-${substr(sha256("${var.namespace}/${var.name}"), 0, 16)}"
  name    = var.name
  content = var.content
}

output "resource_id" {
  description = "The fake-cloud resource's id."
  value       = fakecloud_resource.resource.id
}

output "control_plane_endpoint" {
  description = "What a TerraformCluster takes as spec.controlPlaneEndpoint (SPEC T5)."
  value = {
    host = "${fakecloud_resource.resource.id}.fakecloud.test"
    port = 6443
  }
}
