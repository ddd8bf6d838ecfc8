package bounded

// Type is the type of a JSON value.
type Type int

const (
	Object Type = iota + 1
	Array
	String
	Number
	Bool
	Null
)

func (t Type) String() string {
	switch t {
	case Object:
		return "object"
	case Array:
		return "array"
	case String:
		return "string"
	case Number:
		return "number"
	case Bool:
		return "boolean"
	case Null:
		return "null"
	}
	return "unknown"
}
