package validate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/schema"
)

// Schema validates the objects of karpool's and Karpenter's groups against the CUE schema of
// package schema, the one `karpool vet` and `cue vet` use, so the controller and a CI job reject
// the same manifests. The objects are validated as built (after kustomize), and each finding is
// located through its field path in the file the object came from.
//
// The outcome for an object depends only on its content, so it is remembered: a reconciliation
// of an unchanged revision, which happens every interval, validates nothing again.
type Schema struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte][]schemaProblem
}

// schemaProblem is a finding before it is located in a file.
type schemaProblem struct{ path, msg string }

// maxRemembered bounds the memory of Schema; past it, it starts afresh.
const maxRemembered = 100_000

// batchSize is how many documents go to the schema at once: enough to keep its workers busy, few
// enough to stay far below its size limits.
const batchSize = 100

// NewSchema returns a Schema validator.
func NewSchema() *Schema {
	return &Schema{seen: map[[sha256.Size]byte][]schemaProblem{}}
}

// Validate implements Validator.
func (s *Schema) Validate(_ context.Context, objs []*build.Object) ([]Finding, error) {
	type pending struct {
		o    *build.Object
		key  [sha256.Size]byte
		data []byte
	}
	var out []Finding
	var todo []pending
	for _, o := range objs {
		if _, ours := schema.Groups[o.Object.GroupVersionKind().Group]; !ours {
			continue
		}
		// JSON is YAML, and cheaper to produce.
		data, err := o.Object.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("rendering %s for the schema: %w", o.ID(), err)
		}
		key := sha256.Sum256(data)
		s.mu.Lock()
		problems, ok := s.seen[key]
		s.mu.Unlock()
		if ok {
			out = append(out, located(o, problems)...)
			continue
		}
		todo = append(todo, pending{o, key, data})
	}
	for start := 0; start < len(todo); start += batchSize {
		batch := todo[start:min(start+batchSize, len(todo))]
		var stream bytes.Buffer
		for i, p := range batch {
			if i > 0 {
				stream.WriteString("\n---\n")
			}
			stream.Write(p.data)
		}
		fs, err := schema.ValidateDocuments("built", stream.Bytes())
		if err != nil {
			return nil, fmt.Errorf("schema validation: %w", err)
		}
		problems := make([][]schemaProblem, len(batch))
		for _, f := range fs {
			if f.Severity != schema.Error {
				continue
			}
			if f.Document < 1 || f.Document > len(batch) {
				return nil, fmt.Errorf("schema validation: %s", f.String())
			}
			msg := f.Message
			if f.Value != "" {
				msg += " (got " + f.Value + ")"
			}
			if f.Hint != "" {
				msg += "; " + f.Hint
			}
			problems[f.Document-1] = append(problems[f.Document-1], schemaProblem{f.Path, msg})
		}
		s.mu.Lock()
		if len(s.seen)+len(batch) > maxRemembered {
			s.seen = map[[sha256.Size]byte][]schemaProblem{}
		}
		for i, p := range batch {
			s.seen[p.key] = problems[i]
		}
		s.mu.Unlock()
		for i, p := range batch {
			out = append(out, located(p.o, problems[i])...)
		}
	}
	return out, nil
}

func located(o *build.Object, problems []schemaProblem) []Finding {
	var out []Finding
	for _, p := range problems {
		out = append(out, at(o, p.path, "schema", p.msg))
	}
	return out
}
