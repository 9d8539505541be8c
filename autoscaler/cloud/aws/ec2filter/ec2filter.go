// Package ec2filter builds the filters of EC2 Describe calls from selector terms.
package ec2filter

import (
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tags turns a selector term's tags into filters, in key order; "*" matches any value of the
// key.
func Tags(tags map[string]string) []ec2types.Filter {
	out := make([]ec2types.Filter, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if v := tags[k]; v == "*" {
			out = append(out, New("tag-key", k))
		} else {
			out = append(out, New("tag:"+k, v))
		}
	}
	return out
}

// New is the filter name = any of values.
func New(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}
