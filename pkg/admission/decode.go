package admission

import (
	"bytes"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The webhook decodes with its own scheme so that nothing it registers leaks
// into, or depends on, the process-wide scheme.Scheme (STYLE section 7).
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	// jsonSerializer is the non-strict JSON serializer of codecs: unknown
	// fields are ignored so that a newer API server (or a CRD version with
	// fields this binary does not know) does not break admission. It never
	// converts between versions and never reads YAML or protobuf.
	jsonSerializer runtime.Serializer
)

func init() {
	utilruntime.Must(admissionv1.AddToScheme(scheme))
	// v1beta1 is registered only to recognise it and refuse it in its own
	// version (handler.go); it is never served.
	utilruntime.Must(admissionv1beta1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.Install(scheme))
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("admission: no JSON serializer in the codec factory")
	}
	jsonSerializer = info.Serializer
}

var (
	admissionReviewV1      = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	admissionReviewV1beta1 = admissionv1beta1.SchemeGroupVersion.WithKind("AdmissionReview")
)

// DecodeObject decodes raw (an AdmissionRequest's Object or OldObject) into
// into, a pointer to a captf API type such as *v1alpha1.TerraformClusterIdentity.
// It fails when raw is empty, is not JSON, or holds another kind or version
// than into's. Error texts name kinds and JSON fields, never field values, so
// they can be returned as an internal error (A5) without leaking content (X1).
func DecodeObject(raw runtime.RawExtension, into runtime.Object) error {
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		// Only in-process callers (tests) set Object; the wire form is Raw.
		var err error
		if data, err = raw.MarshalJSON(); err != nil {
			return fmt.Errorf("encoding object: %w", err)
		}
	}
	if isAbsent(data) {
		return errors.New("no object in the request")
	}
	kinds, _, err := scheme.ObjectKinds(into)
	if err != nil {
		return fmt.Errorf("decoding into %T: %w", into, err)
	}
	want := kinds[0]
	// want fills in apiVersion or kind when the object lacks them; present
	// values are kept and compared below.
	out, got, err := jsonSerializer.Decode(data, &want, into)
	if err != nil {
		if got != nil && *got != want {
			return fmt.Errorf("object is %s, expected %s", gvkString(*got), gvkString(want))
		}
		return fmt.Errorf("decoding %s: %w", gvkString(want), err)
	}
	if out != into || *got != want {
		return fmt.Errorf("object is %s, expected %s", gvkString(*got), gvkString(want))
	}
	return nil
}

// DecodeObjects decodes req.OldObject and req.Object into new values of T, a
// captf API type: admission.DecodeObjects[v1alpha1.TerraformClusterIdentity](req).
// An object the request does not carry (OldObject on CREATE, Object on
// DELETE) is returned as nil; a present object that cannot be decoded is an
// error.
func DecodeObjects[T any, PT interface {
	*T
	runtime.Object
}](req *admissionv1.AdmissionRequest) (oldObj, obj PT, err error) {
	if req == nil {
		return nil, nil, errors.New("no admission request")
	}
	if !isAbsent(req.OldObject.Raw) || req.OldObject.Object != nil {
		oldObj = PT(new(T))
		if err := DecodeObject(req.OldObject, oldObj); err != nil {
			return nil, nil, fmt.Errorf("decoding oldObject: %w", err)
		}
	}
	if !isAbsent(req.Object.Raw) || req.Object.Object != nil {
		obj = PT(new(T))
		if err := DecodeObject(req.Object, obj); err != nil {
			return nil, nil, fmt.Errorf("decoding object: %w", err)
		}
	}
	return oldObj, obj, nil
}

// isAbsent reports whether raw carries no object: empty, or the JSON null the
// API server sends for the side of a request that has none.
func isAbsent(raw []byte) bool {
	trimmed := bytes.TrimSpace(raw)
	return len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null"))
}

// gvkString formats a kind as the apiVersion and kind a user writes.
func gvkString(gvk schema.GroupVersionKind) string {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return fmt.Sprintf("%s %s", apiVersion, kind)
}

// gvrString formats a resource as group/version/resource[/subresource], the
// core group as version/resource.
func gvrString(gvr schema.GroupVersionResource, subresource string) string {
	s := gvr.GroupVersion().String() + "/" + gvr.Resource
	if subresource != "" {
		s += "/" + subresource
	}
	return s
}
