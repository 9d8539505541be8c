package awssim

// wireField maps one Go field of an aws-sdk-go-v2 input or output struct to its name on the wire.
type wireField struct {
	Field string // Go field name
	Name  string // query key or XML element name
	// Flat lists are encoded as Name.N (ec2query); other lists as Name.Member.N (awsquery).
	Flat bool
	// Member is the list member name (item, member) for list fields; "" otherwise.
	Member string
}

// wireTable maps a Go type name (without package) to its wire fields.
type wireTable map[string][]wireField
