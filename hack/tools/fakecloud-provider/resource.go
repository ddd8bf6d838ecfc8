package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func pathOf(name string) path.Path { return path.Root(name) }

// fakecloudResource is fakecloud_resource: one resource of the fake cloud.
// Read asks the cloud, so a content changed behind the module's back shows
// in a refresh (drift, SPEC O7) and a resource deleted behind its back
// leaves the state (a plan then creates it again).
type fakecloudResource struct {
	client *client
}

func newResource() resource.Resource { return &fakecloudResource{} }

// resourceModel is the resource's state.
type resourceModel struct {
	ID      types.String `tfsdk:"id"`
	Name    types.String `tfsdk:"name"`
	Content types.String `tfsdk:"content"`
}

func (r *fakecloudResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_resource"
}

func (r *fakecloudResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A resource of the fake cloud. A new id or name replaces it; a new content updates it in place.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Description:   "The resource's id (a DNS label); the fake cloud picks one when it is not set.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The resource's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"content": schema.StringAttribute{
				Required:    true,
				Description: "The resource's content: what the drift test changes behind the module's back.",
			},
		},
	}
}

func (r *fakecloudResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return // validation before the provider is configured
	}
	c, ok := req.ProviderData.(*client)
	if !ok {
		resp.Diagnostics.AddError("fakecloud: unexpected provider data", fmt.Sprintf("got %T", req.ProviderData))
		return
	}
	r.client = c
}

func (r *fakecloudResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	got, err := r.client.create(ctx, plan.ID.ValueString(), plan.Name.ValueString(), plan.Content.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("fakecloud: create", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, model(got))...)
}

func (r *fakecloudResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	got, err := r.client.get(ctx, state.ID.ValueString())
	if errors.Is(err, errNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("fakecloud: read", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, model(got))...)
}

func (r *fakecloudResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	got, err := r.client.setContent(ctx, state.ID.ValueString(), plan.Content.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("fakecloud: update", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, model(got))...)
}

func (r *fakecloudResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.remove(ctx, state.ID.ValueString()); err != nil {
		resp.Diagnostics.AddError("fakecloud: delete", err.Error())
	}
}

func model(r remote) resourceModel {
	return resourceModel{ID: types.StringValue(r.ID), Name: types.StringValue(r.Name), Content: types.StringValue(r.Content)}
}
