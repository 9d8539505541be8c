// Package awstags converts between tags as karpool holds them (a map) and the tag lists of the
// EC2 and IAM APIs, in one place for the cloud provider and the prerequisites. Lists come out
// sorted by key, so requests and rendered documents are the same on every run.
package awstags

import (
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// EC2 is m as EC2 tags; nil when m is empty.
func EC2(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// FromEC2 is the map of EC2 tags.
func FromEC2(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// IAM is m as IAM tags; nil when m is empty.
func IAM(m map[string]string) []iamtypes.Tag {
	var out []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// FromIAM is the map of IAM tags.
func FromIAM(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}
