/// The path part of a DoH URI template (RFC 8484 §4.1), as far as a DoH client needs it.
///
/// A DoH server is named by a URI template whose one variable, `dns`, carries the query of a GET request:
/// `/dns-query{?dns}` (RFC 6570 form-style query expansion: `?dns=…`) or `/q?version=2{&dns}` (continuation:
/// `&dns=…`). The same template comes from an operator (`https://dns.example/dns-query{?dns}`, as Firefox and
/// RFC 8484's examples write it) and from a DDR designation's `dohpath` (RFC 9461 §5). A plain path without an
/// expression, dnsproxy's form (`/dns-query`), is taken too: GET then appends `?dns=…` (or `&dns=…` after a query).
///
/// POST goes to the template with the expression left out (an undefined variable expands to nothing); GET to the
/// template expanded with the query's base64url.
public struct DoHPathTemplate: Hashable, Sendable, CustomStringConvertible {
    /// Why a template cannot be used.
    public struct Invalid: Error, Hashable, Sendable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// The template as written.
    public let template: String
    /// Whether the template names the `dns` variable (RFC 9461 §5 requires it of a `dohpath`).
    public let hasDNSVariable: Bool
    private let before: String
    private let joiner: String

    /// Parses a template: an absolute path of visible ASCII, ending in at most one expression, `{?dns}` or `{&dns}`.
    ///
    /// - Throws: ``Invalid`` saying what is wrong; never traps, whatever `template` holds.
    public init(_ template: String) throws(Invalid) {
        guard template.hasPrefix("/") else {
            throw Invalid(reason: "the path '\(Self.shown(template))' must start with '/'")
        }
        guard template.utf8.count <= 1024 else { throw Invalid(reason: "the path is longer than 1024 bytes") }
        var literal: [String] = [""]
        var expression: String?
        var inExpression = false
        for scalar in template.unicodeScalars {
            if inExpression {
                if scalar == "}" {
                    inExpression = false
                    literal.append("")
                } else if scalar == "{" {
                    throw Invalid(reason: "the path '\(Self.shown(template))' has an unclosed '{'")
                } else {
                    expression!.unicodeScalars.append(scalar)
                }
                continue
            }
            if scalar == "{" {
                guard expression == nil else {
                    throw Invalid(
                        reason: "the path '\(Self.shown(template))' has more than one expression "
                            + "(only {?dns} or {&dns})")
                }
                expression = ""
                inExpression = true
                continue
            }
            guard Self.allowedInPath(scalar) else {
                throw Invalid(
                    reason: "the path '\(Self.shown(template))' must be visible ASCII without spaces, quotes, "
                        + "'#', '<', '>', '\\', '^', '`', '|' or '}' outside an expression")
            }
            literal[literal.count - 1].unicodeScalars.append(scalar)
        }
        guard !inExpression else { throw Invalid(reason: "the path '\(Self.shown(template))' has an unclosed '{'") }
        let query = literal.joined().split(separator: "?", maxSplits: 1).dropFirst().first
        let parameters = query?.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1).first ?? "" } ?? []
        guard !parameters.contains("dns") else {
            throw Invalid(reason: "the path '\(Self.shown(template))' carries a dns parameter itself (write {?dns})")
        }
        if expression != nil, !literal[1].isEmpty {
            // Text after the expression would run into the GET's base64url value, or make POST's path odd.
            throw Invalid(reason: "the path '\(Self.shown(template))' goes on after its expression (it must end it)")
        }
        self.template = template
        before = literal[0]
        switch expression {
        case "?dns":
            hasDNSVariable = true
            joiner = "?"
            guard !before.contains("?") else {
                throw Invalid(reason: "the path '\(Self.shown(template))' has a query before {?dns} (write {&dns})")
            }
        case "&dns":
            hasDNSVariable = true
            joiner = "&"
            guard before.contains("?") else {
                throw Invalid(reason: "the path '\(Self.shown(template))' has {&dns} without a query before it")
            }
        case nil:
            hasDNSVariable = false
            joiner = before.contains("?") ? "&" : "?"
        case .some(let other):
            throw Invalid(reason: "the expression {\(Self.shown(other))} is not {?dns} or {&dns} (RFC 8484 §4.1)")
        }
    }

    /// Where a POST goes: the template without its expression.
    public var postPath: String { before }

    /// Where a GET goes: the template expanded with `dns`, the query in base64url without padding (RFC 8484 §6).
    public func getPath(dns: String) -> String { before + joiner + "dns=" + dns }

    public var description: String { template }

    /// RFC 3986 path and query characters (`pchar`, `/`, `?`, percent escapes), without `{` `}` (template syntax).
    private static func allowedInPath(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.value > 0x20, scalar.value < 0x7F else { return false }
        return !"\"#<>\\^`|{}".unicodeScalars.contains(scalar)
    }

    /// A template as an error shows it: control characters escaped, at most 80 characters.
    private static func shown(_ text: String) -> String {
        let joined = text.unicodeScalars.map {
            $0.value < 0x20 || $0.value == 0x7F ? $0.escaped(asASCII: true) : String($0)
        }.joined()
        return joined.count > 80 ? String(joined.prefix(80)) + "…" : joined
    }
}
