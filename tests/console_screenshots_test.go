package tests

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
)

// The README's screenshots of the console are taken by the browser tests with
// -console-screenshots. So that they cannot silently go stale, the same run writes the visible
// text of each page beside them (screenshotsText), and every run without the flag compares the
// page it would take with that text: a change of what the console shows fails the test until
// the screenshots are taken again.
const (
	// regenerateScreenshots takes the README's screenshots again, from the module's root.
	regenerateScreenshots = "go test ./tests/ -run 'TestConsole$' -console-screenshots=$PWD/docs"
	// screenshotsText is the file, beside the screenshots, of the text each one shows.
	screenshotsText = "console-screenshots.txt"
	// committedScreenshots is the directory of the README's screenshots, from this package's.
	committedScreenshots = "../docs"
)

// screenshot saves the page as name.png, and its text in screenshotsText, in
// -console-screenshots if it is set; else it compares the page's text with that of the
// screenshot of the README, if there is one.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	text := pageText(t, ctx)
	if *consoleScreenshots == "" {
		checkScreenshotText(t, name, text)
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(*consoleScreenshots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	writeScreenshotText(t, *consoleScreenshots, name, text)
}

// shownText is the page's visible text with what varies between runs in elements of its own
// replaced: each time by <time> (the script shows times in the browser's zone and locale, which
// vary between machines) and each event's log position by <position> (the number of events
// written before, which changes with what a keyed write records). The page's text is put back
// after.
const shownText = `(() => {
	const varying = [["time", "<time>"], ["#timeline tbody td:last-child", "<position>"]].flatMap(([sel, as]) =>
		[...document.querySelectorAll(sel)].map(e => ({e, as, shown: e.textContent})));
	varying.forEach(v => { v.e.textContent = v.as; });
	const text = document.body.innerText;
	varying.forEach(v => { v.e.textContent = v.shown; });
	return text;
})()`

// What else varies between runs of the same test, in the text of a page: ids (of orders and
// requests, 26 characters of ULIDs or random text) and times in the events' data.
var (
	shownID   = regexp.MustCompile(`\b[0-9A-Z]{26}\b`)
	shownTime = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
)

// pageText is the visible text of the page, one line for each of its lines that is not blank,
// its spaces and the tabs between table cells made single spaces, and what varies between runs
// replaced by <id>, <time> and <position>.
func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](shownText))
	if err != nil {
		t.Fatalf("read the page's text: %v", err)
	}
	text = shownTime.ReplaceAllString(shownID.ReplaceAllString(text, "<id>"), "<time>")
	var lines []string
	for line := range strings.Lines(text) {
		if fields := strings.Fields(line); len(fields) > 0 {
			lines = append(lines, strings.Join(fields, " "))
		}
	}
	return strings.Join(lines, "\n")
}

// checkScreenshotText fails the test if the page named name, whose text is text, is not what
// the README's screenshot of it shows. A page the README shows no screenshot of is not checked.
func checkScreenshotText(t *testing.T, name, text string) {
	t.Helper()
	texts := readScreenshotTexts(t, committedScreenshots)
	want, ok := texts[name]
	if !ok {
		if _, err := os.Stat(filepath.Join(committedScreenshots, name+".png")); err == nil {
			t.Errorf("docs/%s.png has no text in docs/%s: regenerate the screenshots with %s", name, screenshotsText, regenerateScreenshots)
		}
		return
	}
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(text, "\n")); diff != "" {
		t.Errorf("the console's page is no longer what docs/%s.png shows (-shown there +now):\n%s\n"+
			"regenerate the screenshots with %s, look at them, and commit them with docs/%s",
			name, diff, regenerateScreenshots, screenshotsText)
	}
}

// The screenshots' text file: a comment, then each screenshot's text under a line
// "== <name> ==", in the order of their names.
const (
	screenshotsTextHeader = "# The visible text of the console's screenshots in this directory, written with them by\n" +
		"# " + regenerateScreenshots + "\n" +
		"# (the browser tests compare the pages with it); ids, times and log positions are shown as\n" +
		"# <id>, <time> and <position>.\n"
	sectionOpen, sectionClose = "== ", " =="
)

// readScreenshotTexts reads the screenshots' text file in dir: each screenshot's text by its
// name, none if there is no file.
func readScreenshotTexts(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, screenshotsText))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	name, lines := "", []string(nil)
	// A last section without a name ends the file's last one.
	for line := range strings.Lines(string(b) + sectionOpen + sectionClose + "\n") {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, sectionOpen) && strings.HasSuffix(line, sectionClose) {
			if name != "" {
				texts[name] = strings.Join(lines, "\n")
			}
			name, lines = strings.TrimSuffix(strings.TrimPrefix(line, sectionOpen), sectionClose), nil
			continue
		}
		if name != "" && line != "" {
			lines = append(lines, line)
		}
	}
	return texts
}

// writeScreenshotText sets the text of the screenshot name in dir's text file, keeping the
// others': a run of some of the tests takes only some of the screenshots.
func writeScreenshotText(t *testing.T, dir, name, text string) {
	t.Helper()
	texts := readScreenshotTexts(t, dir)
	texts[name] = text
	var b strings.Builder
	b.WriteString(screenshotsTextHeader)
	for _, n := range slices.Sorted(maps.Keys(texts)) {
		b.WriteString("\n" + sectionOpen + n + sectionClose + "\n" + texts[n] + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, screenshotsText), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
