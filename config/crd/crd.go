// Package crd embeds the CustomResourceDefinitions generated from api/ (make generate), so that
// the local environment and `karpool up` install exactly what this binary was built with.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var files embed.FS

// All returns every embedded CRD, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := Load(files, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("config/crd: %w (run make generate)", err)
	}
	return crds, nil
}

// Load reads the CRDs of the files matching pattern in fsys (one per file), sorted by file name.
func Load(fsys fs.FS, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
