package mdsafe_test

import (
	"bytes"
	stdhtml "html"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/karpool/karpool/internal/mdsafe"
	"github.com/karpool/karpool/testbed/mdshape"
)

var gfm = goldmark.New(goldmark.WithExtensions(extension.GFM))

func html(t *testing.T, md string) string {
	t.Helper()
	var b bytes.Buffer
	if err := gfm.Convert([]byte(md), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// oneLine is what Text and Code keep of s: control characters as spaces, white space
// collapsed.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(visible(s)), " ")
}

// visible is s with control characters other than line feeds and tabs, and bidirectional
// controls, replaced.
func visible(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f || strings.ContainsRune("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c", r) {
			return '\ufffd'
		}
		return r
	}, s)
}

// TestText: in every inline place karpool puts a value (a paragraph, the start of a list item,
// before a "." or ")", a table cell, a heading, bold), a hostile value has the shape of a plain word and reads as
// itself once rendered, joiners aside.
func TestText(t *testing.T) {
	places := []string{"x %s y\n", "- %s\n", "%s\n", "%s.\n", "- %s) x\n", "| a |\n|---|\n| %s |\n", "## %s\n", "- **%s**: x\n"}
	for _, place := range places {
		want := mdshape.Of(strings.Replace(place, "%s", "word", 1))
		for _, s := range mdshape.Hostile {
			md := strings.Replace(place, "%s", mdsafe.Text(s), 1)
			if s != "" && oneLine(s) != "" {
				sameShape(t, md, want)
			}
		}
	}
	for _, s := range mdshape.Hostile {
		m := inParagraph.FindStringSubmatch(html(t, "x "+mdsafe.Text(s)+" y\n"))
		if m == nil || strings.ReplaceAll(stdhtml.UnescapeString(m[1]), "\u2060", "") != oneLine(s) {
			t.Errorf("Text(%q) = %q renders as %v", s, mdsafe.Text(s), m)
		}
	}
}

var inParagraph = regexp.MustCompile(`(?s)^<p>x (.*) y</p>\n$`)

// TestTextOrdinary: ordinary names are left as they are.
func TestTextOrdinary(t *testing.T) {
	for _, s := range []string{"default", "m5.large", "inflate-7d9f", "shop/web-4", "us-east-1", "NodePool default's template changed", "cpu 4/4, memory 3788Mi/40Gi"} {
		if got := mdsafe.Text(s); got != s {
			t.Errorf("Text(%q) = %q", s, got)
		}
	}
	for s, want := range map[string]string{"@org/team": "@&#8288;org/team", "https://x.example": "https:&#8288;//x.example", "see #12": "see \\#&#8288;12",
		"www.x.example": "www&#8288;.x.example", "1. a": "1\\. a", "- a - b": "\\- a - b", "12": "1&#50;", "a<b>&c": "a&lt;b&gt;&amp;c"} {
		if got := mdsafe.Text(s); got != want {
			t.Errorf("Text(%q) = %q, want %q", s, got, want)
		}
	}
}

var codeSpan = regexp.MustCompile(`(?s)^<p>x <code>(.*)</code> y</p>\n$`)

// TestCode: a hostile value in a code span, mid-line or at the start of a list item, stays one
// code span that shows the value.
func TestCode(t *testing.T) {
	for _, place := range []string{"x %s y\n", "- %s y\n", "%s y\n"} {
		want := mdshape.Of(strings.Replace(place, "%s", "`word`", 1))
		for _, s := range mdshape.Hostile {
			sameShape(t, strings.Replace(place, "%s", mdsafe.Code(s), 1), want)
		}
	}
	for _, s := range mdshape.Hostile {
		m := codeSpan.FindStringSubmatch(html(t, "x "+mdsafe.Code(s)+" y\n"))
		want := oneLine(s)
		if want == "" {
			want = " "
		}
		if m == nil || stdhtml.UnescapeString(m[1]) != want {
			t.Errorf("Code(%q) = %q renders as %v", s, mdsafe.Code(s), m)
		}
	}
}

// TestFence: hostile content, lines of it or all of it, stays in its fenced block, as it is.
func TestFence(t *testing.T) {
	want := mdshape.Of("```diff\nword\n```\n\nafter\n")
	for _, s := range append(mdshape.Hostile, strings.Join(mdshape.Hostile, "\n"), "```\n</details>\n", "~~~~\n````\n", "a\n```") {
		md := mdsafe.Fence("diff", s) + "\nafter\n"
		sameShape(t, md, want)
		body := strings.TrimSuffix(strings.TrimPrefix(html(t, md), `<pre><code class="language-diff">`), "</code></pre>\n<p>after</p>\n")
		want := visible(s)
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		if stdhtml.UnescapeString(body) != want {
			t.Errorf("Fence of %q renders as %q", s, body)
		}
	}
}

func sameShape(t *testing.T, md string, want mdshape.Shape) {
	t.Helper()
	got := mdshape.Of(md)
	if !maps.Equal(got.Elements, want.Elements) || len(got.HTML) != len(want.HTML) || len(got.Triggers) > 0 {
		t.Errorf("%q has the shape %+v, want %+v", md, got, want)
	}
}

// FuzzText: whatever the value, it adds nothing to the line it is in.
func FuzzText(f *testing.F) {
	for _, s := range mdshape.Hostile {
		f.Add(s)
	}
	want := mdshape.Of("- word **word** `word`\n\n```\nword\n```\n")
	f.Fuzz(func(t *testing.T, s string) {
		md := "- " + mdsafe.Text(s+"x") + " **" + mdsafe.Text("x"+s) + "** " + mdsafe.Code(s) + "\n\n" + mdsafe.Fence("", s)
		sameShape(t, md, want)
	})
}
