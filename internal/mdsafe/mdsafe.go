// Package mdsafe puts text that someone else controls (object names, messages, paths, diffs
// from a pull request's branch) into GitHub- and Gitea-flavoured Markdown so that it reads as
// itself: it can add no HTML, link, image, heading, list, table cell or emphasis, cannot end
// the code span or fenced block it sits in, and does not make the forge notify anyone.
//
// Escaping Markdown syntax is not enough on a forge. GitHub and Gitea render Markdown to HTML
// and only then turn the text of that HTML into links: @mentions (which notify), #123 issue
// references, bare URLs and email addresses, and on Gitea [[short links]]. A backslash or an
// entity such as &#64; is gone by then, so Text breaks those sequences with an invisible WORD
// JOINER (U+2060) instead. Both forges leave the text of code spans and code blocks alone.
package mdsafe

import (
	"fmt"
	"strings"
	"unicode"
)

// joiner is U+2060 WORD JOINER as an entity: invisible once rendered, it splits "@" from a
// name, ":" from "//" and "www" from "." in the HTML text that the forges' linkers scan, and
// as an entity it is also visible in the Markdown source and in diffs of it.
const joiner = "&#8288;"

// punctuation is the ASCII punctuation that means something anywhere in a line of GFM (or of
// GitHub's and Gitea's math): backslash escapes, code spans, emphasis, links and images,
// strikethrough, table cells, headings, math. A backslash before any of them is plain text
// (CommonMark allows it before every ASCII punctuation character). "(", ")", ":" and quotes
// only mean something after "[", which is escaped, so they are left readable.
const punctuation = "\\`*_[]~|#!$"

// Text is s as inline text on one line: in a paragraph, list item, heading or table cell, at
// the start of a line or within one. Line breaks and other control characters become spaces.
func Text(s string) string {
	s = oneLine(s)
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i, r := range s {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case strings.ContainsRune(punctuation, r), blockStart(s, i):
			b.WriteByte('\\')
			b.WriteRune(r)
		case i == len(s)-1 && allDigits(s):
			// A number followed by the template's "." or ")" at the start of a line would be
			// a list marker; a character reference is no digit to the block parser.
			fmt.Fprintf(&b, "&#%d;", r)
		default:
			b.WriteRune(r)
		}
		if linksAfter(s, i) {
			b.WriteString(joiner)
		}
	}
	return b.String()
}

// blockStart says whether s[i] would start a block were s at the start of a line: a list
// marker ("-", "+", "1." or "1)"), or a setext underline ("="). The other block starts ("#",
// ">", "*", "`", "~", "<", "|") are escaped wherever they are.
func blockStart(s string, i int) bool {
	switch s[i] {
	case '-', '+', '=':
		return i == 0
	case '.', ')':
		return i > 0 && allDigits(s[:i])
	}
	return false
}

// linksAfter says whether the forge would turn what starts at s[i] into a link or mention
// after rendering, so that a joiner must follow s[i]: "@name" (also user@host), "scheme://",
// "www.", "#123" (an issue, also owner/repo#123) and Gitea's "[[".
func linksAfter(s string, i int) bool {
	rest := s[i+1:]
	switch s[i] {
	case '@':
		return true
	case ':':
		return strings.HasPrefix(rest, "//")
	case '#':
		return rest != "" && rest[0] >= '0' && rest[0] <= '9'
	case '[':
		return strings.HasPrefix(rest, "[")
	case 'w', 'W':
		return i >= 2 && strings.EqualFold(s[i-2:i+1], "www") && strings.HasPrefix(rest, ".")
	}
	return false
}

// Code is s as a code span on one line, shown literally: the forges neither render nor link
// what is inside. The span's backtick string is longer than any run of backticks in s, so s
// cannot end it. Code is not for table cells, where a "|" would still split the cell.
//
// A code span at the start of a line whose delimiter has three or more backticks does not open
// a fenced block: its closing delimiter on the same line puts backticks in the would-be info
// string, which CommonMark forbids for backtick fences.
func Code(s string) string {
	s = oneLine(s)
	if s == "" {
		return "` `" // an empty span is not a span; a lone space is kept as is
	}
	tick := strings.Repeat("`", longestRun(s, '`')+1)
	if s[0] == '`' || s[len(s)-1] == '`' {
		// One space on each side is stripped again; without it the delimiter would run on.
		s = " " + s + " "
	}
	return tick + s + tick
}

// Fence is s as a fenced code block with the info string info (karpool's own, say "diff",
// without backticks), ending with a newline. The fence is longer than any run of backticks in
// s, so no line of s can close it; control characters other than line feeds and tabs, and
// bidirectional controls, are replaced as in Text.
func Fence(info, s string) string {
	s = Visible(s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + info + "\n" + s + fence + "\n"
}

// Visible is s with every character that makes text look other than it is replaced, as in
// Text, line feeds and tabs kept: for text a reviewer reads in a terminal or a CI log as well,
// where a branch's escape sequences would otherwise move the cursor or recolour lines.
func Visible(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		return visible(r)
	}, s)
}

// oneLine replaces control and bidirectional formatting characters and collapses white space,
// line breaks included, to single spaces, trimmed.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return visible(r)
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// visible replaces the characters that make text look other than it is: control characters,
// and the explicit bidirectional embeddings, overrides, isolates and marks that can reorder
// what a reviewer sees (CVE-2021-42574), with U+FFFD.
func visible(r rune) rune {
	switch {
	case unicode.IsControl(r),
		r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069',
		r == '\u200e', r == '\u200f', r == '\u061c':
		return unicode.ReplacementChar
	}
	return r
}

func allDigits(s string) bool { return strings.Trim(s, "0123456789") == "" }

func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}
