package main

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// fakecloudProvider is the provider: its configuration names the fake
// cloud's endpoint and the credential file.
type fakecloudProvider struct {
	version string
}

func newProvider(version string) func() provider.Provider {
	return func() provider.Provider { return &fakecloudProvider{version: version} }
}

// providerModel is the provider block.
type providerModel struct {
	Endpoint       types.String `tfsdk:"endpoint"`
	CredentialFile types.String `tfsdk:"credential_file"`
}

func (p *fakecloudProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "fakecloud"
	resp.Version = p.version
}

func (p *fakecloudProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The fake cloud of captf's tests (test/fakecloud). The credential is FAKECLOUD_TOKEN from the environment, else the content of credential_file.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Required:    true,
				Description: "URL of the fake cloud, e.g. http://10.0.0.15:8080.",
			},
			"credential_file": schema.StringAttribute{
				Optional:    true,
				Description: "The credential file when FAKECLOUD_TOKEN is not set (default " + DefaultCredentialFile + ", where a captf Job mounts it).",
			},
		},
	}
}

func (p *fakecloudProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() || cfg.Endpoint.ValueString() == "" {
		resp.Diagnostics.AddAttributeError(pathOf("endpoint"), "fakecloud: no endpoint", "The provider's endpoint must be known and not empty.")
		return
	}
	c := &client{endpoint: cfg.Endpoint.ValueString(), credentialFile: DefaultCredentialFile, http: &http.Client{}}
	if v := cfg.CredentialFile.ValueString(); v != "" {
		c.credentialFile = v
	}
	resp.ResourceData = c
}

func (p *fakecloudProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newResource}
}

func (p *fakecloudProvider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}
