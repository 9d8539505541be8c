// Package examples embeds the example pool repositories, so that `karpool up` can seed its
// local git server from any working directory.
package examples

import "embed"

// FS holds workshop/ and seeds/.
//
//go:embed workshop seeds
var FS embed.FS
