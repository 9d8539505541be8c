// Package mdshape says what a Markdown document does once a forge renders it, for tests that
// check that text placed with mdsafe changes none of it: the document's elements, its raw
// HTML, and the text that GitHub or Gitea would still turn into a link or a notification
// after rendering. It parses with goldmark and its GFM extension (tables, strikethrough,
// linkify, task lists), a CommonMark parser close to both forges'.
package mdshape

import (
	"bufio"
	"bytes"
	stdhtml "html"
	"regexp"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
)

// Shape is what a document does.
type Shape struct {
	// Elements counts the nodes by kind ("Heading", "Link", "AutoLink", "Image", "Emphasis",
	// "FencedCodeBlock", "HTMLBlock", "RawHTML", "Table", "ListItem", ...), plain text aside.
	Elements map[string]int
	// HTML is the raw HTML as written: each HTML block and inline tag, in order.
	HTML []string
	// Triggers are the pieces of rendered text outside code that a forge links after
	// rendering: "@name" (a mention, or an email address), "#1" (an issue), "[[" (a Gitea
	// short link), "scheme://" or "www." (a URL).
	Triggers []string
}

var gfm = goldmark.New(goldmark.WithExtensions(extension.GFM))

// triggers is what the forges' HTML filters look for, a little wider than each of them: a
// mention needs no word character before it here, a URL no host after it.
var triggers = regexp.MustCompile(`@[\w-]|#[0-9]|\[\[|(?i:[a-z][a-z0-9+.-]*://|\bwww\.)`)

// Of parses md.
func Of(md string) Shape {
	src := []byte(md)
	doc := gfm.Parser().Parse(text.NewReader(src))
	s := Shape{Elements: map[string]int{}}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch k := n.Kind(); k {
		case ast.KindText, ast.KindString:
			return ast.WalkContinue, nil
		case ast.KindHTMLBlock:
			s.HTML = append(s.HTML, string(n.(*ast.HTMLBlock).Text(src)))
		case ast.KindRawHTML:
			var tag []byte
			segs := n.(*ast.RawHTML).Segments
			for i := range segs.Len() {
				seg := segs.At(i)
				tag = append(tag, seg.Value(src)...)
			}
			s.HTML = append(s.HTML, string(tag))
		}
		s.Elements[n.Kind().String()]++
		if n.Type() == ast.TypeBlock && n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeInline ||
			n.Kind() == ast.KindEmphasis || n.Kind().String() == "Strikethrough" {
			s.Triggers = append(s.Triggers, triggersIn(n, src)...)
		}
		return ast.WalkContinue, nil
	})
	return s
}

// triggersIn finds triggers in the text directly under n. Adjacent text nodes are one text in
// the rendered HTML, as the forges' filters see it: their escapes and entities resolved. Code
// spans, links and raw HTML end a text and are not searched, nor is emphasis (Of searches it
// on its own).
func triggersIn(n ast.Node, src []byte) []string {
	var found []string
	var run bytes.Buffer
	flush := func() {
		found = append(found, triggers.FindAllString(stdhtml.UnescapeString(run.String()), -1)...)
		run.Reset()
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch t := c.(type) {
		case *ast.Text:
			run.WriteString(rendered(t.Value(src), t.IsRaw()))
			if t.SoftLineBreak() || t.HardLineBreak() {
				run.WriteByte('\n')
			}
		case *ast.String:
			run.WriteString(rendered(t.Value, t.IsRaw()))
		default:
			flush()
		}
	}
	flush()
	return found
}

// rendered is text as goldmark writes it into HTML: backslash escapes and entities resolved,
// and HTML's special characters escaped again.
func rendered(value []byte, raw bool) string {
	if raw {
		return stdhtml.EscapeString(string(value))
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	html.DefaultWriter.Write(w, value)
	_ = w.Flush()
	return b.String()
}

// Benign returns a mapping of strings to letters, the same string to the same letter, for a
// twin of a document whose strings are hostile: built from the benign strings, it has the
// same sections, rows and groups, and shows what the template alone does. Blank strings are
// kept, since they render as nothing either way. A letter is no longer than what a non-blank
// string renders as, so that a twin cut to a length is cut no earlier. It serves up to 52
// strings.
func Benign() func(string) string {
	seen := map[string]string{}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	return func(s string) string {
		if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) && !unicode.IsControl(r) }) < 0 {
			return s
		}
		if _, ok := seen[s]; !ok {
			seen[s] = letters[len(seen) : len(seen)+1]
		}
		return seen[s]
	}
}

// Hostile are values a branch may put in an object name, message, path or diff, for seeds
// and tables of tests: HTML, mentions, links, code span and fence ends, block starts,
// entities, control, bidirectional and zero-width characters, and ordinary names.
var Hostile = []string{
	"</details><img src=x>", "<details><summary>x</summary>", "<script>alert(1)</script>", "<!-- -->", "<!--", "-->",
	"@org/team", "@user please look", "cc @a, @b", "user@example.com", "&#64;org", "\\@org", "@\u200borg",
	"[x](https://evil)", "![img](x)", "[x](javascript:alert(1))", "<https://evil>", "<javascript:alert(1)>",
	"https://evil.example", "HTTPS://EVIL.EXAMPLE/x?y=1", "www.evil.example", "WWW.Evil.Example", "ftp://x.example", "mailto:a@b.example",
	"javascript:alert(1)", "[x]: https://evil", "[^1]", "[[Home|https://evil.example]]", "#123", "org/repo#12", "GH-1",
	"`", "``", "a```b", "```", "```diff", "~~~", "` x `", "`a", "a`",
	"\n# heading", "# heading", "### h", "\r\n## h", "| table |", "a | b", "- item", "1. item", "12) item", "+ x", "> quote", "---", "===", "***", "___",
	"    indented", "\tindented", "*em* _em_ **b** ~~s~~ ~s~", "$x^2$", "$$\nx\n$$", "\\(x\\)", "\\", "trailing\\", "&lt;", "&amp;", "&",
	"\x00nul", "a\x1bb[31m", ":+1:", "- [x] task", "[ ] task", "<br>", "\u202egnp.exe", "a\u2066b\u2069c", "a\u200bb\u200dc\ufeff",
	"default", "m5.large", "inflate-7d9f", "42", "",
	strings.Repeat("@x ", 2000), strings.Repeat("`", 300),
}
