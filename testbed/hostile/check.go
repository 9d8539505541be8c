package hostile

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/karpool/karpool/testbed/mdshape"
)

var (
	punctEscape = regexp.MustCompile(`\\([[:punct:]])`)
	htmlTag     = regexp.MustCompile(`<[^>]*>`)
	ownTag      = regexp.MustCompile(`^(<!-- karpool-plan path="[^"<>]*" -->|</?details>|</?summary>|</?sub>)$`)
)

// Located says whether out (text, or Markdown with its escapes) reports want's error: its
// file and line, then its message, on one line.
func Located(out string, want Want) bool {
	for _, l := range strings.Split(out, "\n") {
		l = punctEscape.ReplaceAllString(strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "&#8288;", "").Replace(l), "$1")
		if i := strings.Index(l, want.Where()); i >= 0 && strings.Contains(l[i:], want.Message) {
			return true
		}
	}
	return false
}

// Steered lists what a comment does beyond karpool's template: links, images, text a forge
// would link or notify, HTML other than the template's own.
func Steered(md string) []string {
	s := mdshape.Of(md)
	var out []string
	for _, k := range []string{"Link", "AutoLink", "Image"} {
		if s.Elements[k] > 0 {
			out = append(out, fmt.Sprintf("%d %s", s.Elements[k], k))
		}
	}
	if len(s.Triggers) > 0 {
		out = append(out, fmt.Sprintf("text a forge would link or notify: %q", s.Triggers))
	}
	for _, h := range s.HTML {
		for _, tag := range htmlTag.FindAllString(h, -1) {
			if !ownTag.MatchString(tag) {
				out = append(out, fmt.Sprintf("HTML karpool did not write: %q", tag))
			}
		}
	}
	return out
}
