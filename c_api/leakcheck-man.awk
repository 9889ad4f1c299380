# leakcheck-man.awk — writes the leakcheck(3) man page from leakcheck.h.
#
#   awk -v version=0.1.0 -f leakcheck-man.awk leakcheck.h > leakcheck.3
#
# The header is the reference: its comments are written to be read, so the
# page is the header laid out for man(1), not a second text to keep in step.
#   - the comment that opens the file becomes DESCRIPTION;
#   - each "---- Title ----" banner starts a section named by its title, and
#     the text of a banner comment opens that section;
#   - a comment that starts a line (column 0) is prose, set as paragraphs;
#     inside it, lines indented by two spaces are shown as they are, and
#     "  - " starts a list item;
#   - every other line is a declaration, shown verbatim in bold; a
#     function-like macro continued with backslashes shows its first line
#     only (its use is documented in prose), and the include guard,
#     extern "C" and macros whose names end in "_" (internal) are left out.
# POSIX awk only (Debian's default is mawk).

function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    gsub(/—/, "\\(em", s)
    if (s ~ /^[.']/)
        s = "\\&" s
    return s
}

# Prose: `code` in bold, *word* in italics.
function prose(s,    out) {
    s = esc(s)
    out = ""
    while (match(s, /`[^`]+`/)) {
        out = out substr(s, 1, RSTART - 1) "\\fB" \
              substr(s, RSTART + 1, RLENGTH - 2) "\\fR"
        s = substr(s, RSTART + RLENGTH)
    }
    s = out s
    out = ""
    while (match(s, /\*[a-z]+\*/)) {
        out = out substr(s, 1, RSTART - 1) "\\fI" \
              substr(s, RSTART + 1, RLENGTH - 2) "\\fR"
        s = substr(s, RSTART + RLENGTH)
    }
    return out s
}

function mode(m) {
    if (m == cur)
        return
    if (cur == "code" || cur == "pre")
        print ".fi"
    if (cur == "code")
        print ".ft R"
    if (m == "code") {
        print ".PP"
        print ".nf"
        print ".ft B"
    } else if (m == "pre") {
        print ".PP"
        print ".nf"
    } else if (m == "para") {
        print ".PP"
    }
    cur = m
}

# One line of a comment's text, " * " already stripped.
function text(s) {
    if (s ~ /^[ \t]*$/) {
        if (cur == "pre")
            preblank = 1
        else if (cur == "para" || cur == "item")
            mode("gap")
        return
    }
    if (preblank) {
        preblank = 0
        if (s ~ /^  /)
            print ""
        else
            mode("gap")
    }
    if (s ~ /^  - /) {
        mode("item")
        print ".IP \\(bu 3"
        sub(/^  - /, "", s)
        print prose(s)
        return
    }
    if (cur == "item" && s ~ /^    [^ ]/) {
        sub(/^ +/, "", s)
        print prose(s)
        return
    }
    if (s ~ /^  /) {
        mode("pre")
        print esc(s)
        return
    }
    if (cur != "para")
        mode("para")
    print prose(s)
}

# A comment line with its delimiters stripped.
function comment_text(s) {
    sub(/[ \t]*\*\/[ \t]*$/, "", s)
    sub(/^\/\*+ ?/, "", s)
    sub(/^ \* ?/, "", s)
    sub(/^ \*$/, "", s)
    return s
}

function section(title) {
    mode("")
    print ".SH " toupper(title)
}

BEGIN {
    cur = ""
    state = "head"     # head: the opening comment; body: the rest
    incomment = 0      # inside a prose comment
    skipcont = 0       # skipping a function-like macro's continuation lines
    contmacro = 0      # showing an object-like macro's continuation lines
    print ".\\\" Generated from leakcheck.h by leakcheck-man.awk: edit those."
    print ".TH LEAKCHECK 3 \"\" \"leakcheck " version "\" \"leakcheck manual\""
    print ".SH NAME"
    print "leakcheck \\- makes leaks a test failure: snapshots, scope and" \
          " series verdicts, Check macros"
    print ".SH SYNOPSIS"
    print ".nf"
    print ".B #include <leakcheck.h>"
    print ".PP"
    print ".B cc test.c $(pkg\\-config \\-\\-cflags \\-\\-libs leakcheck)"
    print ".fi"
}

# The opening comment, up to the include guard.
state == "head" {
    if ($0 ~ /^\/\*/)
        next
    if ($0 ~ /^ \*\//) {
        mode("")
        state = "body"
        next
    }
    if (cur == "") {
        print ".SH DESCRIPTION"
        cur = "gap"
    }
    text(comment_text($0))
    next
}

skipcont {
    skipcont = ($0 ~ /\\$/)
    next
}

# An object-like macro continued over lines: shown whole, without the
# backslashes.
contmacro {
    contmacro = ($0 ~ /\\$/)
    line = $0
    sub(/[ \t]*\\$/, "", line)
    print esc(line)
    next
}

incomment {
    if ($0 ~ /\*\//)
        incomment = 0
    if ($0 !~ /^ \*\/[ \t]*$/)
        text(comment_text($0))
    next
}

# A banner: /* ---- Title ---- */, perhaps with text below it.
/^\/\* -+ [A-Za-z]/ {
    title = $0
    sub(/^\/\* -+ /, "", title)
    sub(/ -+.*$/, "", title)
    section(title)
    cur = "gap"
    incomment = ($0 !~ /\*\//)
    next
}

/^\/\*/ {
    if (cur == "code")
        mode("gap")
    incomment = ($0 !~ /\*\//)
    text(comment_text($0))
    next
}

/^[ \t]*$/ {
    if (cur == "code")
        mode("gap")
    next
}

/^#(if|ifdef|ifndef|else|endif|include)/ { next }
/^#define LEAKCHECK_H/                    { next }
/^extern "C"|^}$/                         { next }
/^#define [A-Za-z0-9_]*_[( ]/ {
    skipcont = ($0 ~ /\\$/)
    next
}

/^#define [A-Za-z0-9_]+\(.*\\$/ {
    line = $0
    sub(/[ \t]*\\$/, "", line)
    mode("code")
    print esc(line " ...")
    skipcont = 1
    next
}

/^#define .*\\$/ {
    line = $0
    sub(/[ \t]*\\$/, "", line)
    mode("code")
    print esc(line)
    contmacro = 1
    next
}

{
    mode("code")
    print esc($0)
}

END {
    section("see also")
    print ".BR pkg\\-config (1),"
    print ".BR check (3)"
}
