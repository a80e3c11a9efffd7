package toolsearch

import (
	"slices"
	"strings"
)

// synonymGroups are words that name the same thing or action when a task
// is described to a tool host: a query word brings in the other words of
// its groups at a lower weight (params.expand), so that "take a picture
// of the page" reaches screenshot and "make a folder" create_directory.
// BM25 alone only matches the words a tool's author happened to use.
//
// The groups are general vocabulary of the domains tools serve (files and
// directories, shells, HTTP, browsers, a knowledge graph, agents, a
// model's context). Some words were added after reading the misses of
// test phrasings; testdata/README.md says which rounds, and how each was
// checked against phrasings written after it. A word may sit in several
// groups ("open" reads a file and loads a page).
var synonymGroups = []string{
	// files and directories
	"directory folder dir subdirectory subfolder",
	"file document",
	"list ls enumerate contents listing",
	"read open view show cat display see look print load dump",
	"write save store persist put",
	"create make new add mkdir",
	"edit modify change update replace patch tweak alter",
	"delete remove erase drop forget rm discard unlink destroy",
	"move rename mv relocate",
	"copy duplicate cp clone",
	"search find locate lookup grep ripgrep rg seek query look",
	"match contain mention occur occurrence",
	"tree hierarchy structure layout nested recursive overview outline",
	"size big large bytes biggest largest space heavy small",
	"metadata info information details stat attributes permissions modified timestamp changed",
	"image picture photo screenshot snapshot png jpg jpeg capture",
	"audio sound recording music mp3 wav voice listen hear play",
	"media image audio video",
	"head first beginning top start",
	"tail last end bottom",
	"content contents text body words",
	"multiple several many batch simultaneously bulk",
	"diff compare difference preview",
	"pattern glob wildcard extension",
	"source src code program",
	"all every everything entire whole complete",
	"config configuration settings",
	"repository repo project",
	// shells and programs
	"command shell bash terminal cli execute run script",
	"command install git npm pip cargo docker compile",
	"javascript js node nodejs",
	// the network
	"http https web url link address endpoint api rest webhook",
	"request fetch download call curl wget retrieve",
	"header headers",
	"status code response",
	// the browser
	"browser chrome chromium tab",
	"page website site webpage",
	"navigate go visit open browse load",
	"click press tap push button",
	"type fill enter input field box textbox textarea form",
	"wait until appear visible show",
	"evaluate eval run execute javascript expression script",
	"html markup dom element source",
	"url address location",
	// a knowledge graph
	"memory remember memorize memorized recall knowledge know",
	"observation fact note detail",
	"entity person people thing company organization node record",
	"relation relationship link connection connect associate related",
	"graph knowledge",
	// agents and roles
	"agent assistant helper worker subagent bot",
	"spawn start launch create hire",
	"terminate kill stop end shut cancel abort",
	"message tell notify send inform ping",
	"role persona",
	"task job assignment work",
	// a model's context
	"context conversation history transcript window",
	"compress summarize summarise condense shrink compact shorten trim",
	"status usage full budget remaining left tokens",
	// handing results over
	"artifact blob attachment output share",
	// the operator's console
	"console terminal operator",
	"print display output echo",
	// utilities
	"echo repeat mirror parrot",
	"sum add plus total calculate arithmetic",
	"environment env variables vars",
	"compress zip gzip archive gz",
	"toggle switch enable disable turn",
	"simulated simulate fake mock pretend dummy",
	"logging log logs",
	"subscription subscribe subscriber subscribed updates notifications",
	"long slow lengthy",
	"progress step steps",
	"research investigate study dig",
}

// synonyms maps a stemmed term to the stemmed terms of its groups, itself
// left out.
var synonyms = buildSynonyms(synonymGroups)

// buildSynonyms stems every word of every group and links each to the
// others of its groups.
func buildSynonyms(groups []string) map[string][]string {
	sets := map[string]map[string]bool{}
	for _, g := range groups {
		var terms []string
		for _, w := range strings.Fields(g) {
			terms = append(terms, tokenize(w)...)
		}
		for _, a := range terms {
			for _, b := range terms {
				if a == b {
					continue
				}
				if sets[a] == nil {
					sets[a] = map[string]bool{}
				}
				sets[a][b] = true
			}
		}
	}
	out := make(map[string][]string, len(sets))
	for a, set := range sets {
		for b := range set {
			out[a] = append(out[a], b)
		}
		slices.Sort(out[a])
	}
	return out
}
