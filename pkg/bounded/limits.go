package bounded

// Limits bound one read. A zero field takes the default below, sized for
// a small document such as the runner's result (a termination message is
// at most 4 KiB); readers of larger data set every field.
type Limits struct {
	// MaxInput bounds the bytes read from the source: the compressed bytes
	// for Gunzip.
	MaxInput int64
	// MaxSize bounds the bytes produced: the decompressed bytes for
	// Gunzip, the JSON text for Decoder and Unmarshal, the bytes for
	// ReadAll.
	MaxSize int64
	// MaxDepth bounds JSON nesting: the number of objects and arrays open
	// at once.
	MaxDepth int
	// MaxValues bounds the number of JSON values in the document: every
	// object, array, string, number and literal, keys not counted.
	MaxValues int
	// MaxToken bounds the length of every JSON string (object keys
	// included) and number, in bytes as written.
	MaxToken int
	// MaxKey bounds the keys Decoder.Object hands to its callback, in
	// bytes as written: a key is held in memory, a skipped string is not.
	MaxKey int
}

// Defaults of a zero Limits field.
const (
	DefaultMaxInput  = 64 << 10
	DefaultMaxSize   = 64 << 10
	DefaultMaxDepth  = 32
	DefaultMaxValues = 4096
	DefaultMaxToken  = 16 << 10
	DefaultMaxKey    = 256
)

// norm returns l with its zero fields set to the defaults.
func (l Limits) norm() Limits {
	if l.MaxInput <= 0 {
		l.MaxInput = DefaultMaxInput
	}
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	if l.MaxToken <= 0 {
		l.MaxToken = DefaultMaxToken
	}
	if l.MaxKey <= 0 {
		l.MaxKey = DefaultMaxKey
	}
	return l
}
