import DiscoverAPI
import Foundation
import Testing

/// docs/API.md lists every method, type and error of every interface; these tests hold it to the IDL the daemon
/// serves, so the reference cannot drift from the code.
@Suite("docs/API.md matches the IDL")
struct ReferenceDocumentTests {
    /// One interface's declarations as docs/API.md lists them: `Name(a, b?)` → `x, y?` for methods,
    /// `Name`: `a, b?` for types, `Name(a, b?)` for errors; names only, optionality marks stripped.
    struct Listed: Equatable {
        var methodParameters: [String: [String]] = [:]
        var methodReplies: [String: [String]] = [:]
        var types: [String: [String]] = [:]
        var errors: [String: [String]] = [:]
    }

    static let document: String = {
        // Tests/DiscoverServerTests/ReferenceDocumentTests.swift → repository root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/API.md"), encoding: .utf8)) ?? ""
    }()

    /// `a, b?, c` → `["a", "b", "c"]`.
    static func names(_ list: Substring) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .map { $0.hasSuffix("?") ? String($0.dropLast()) : $0 }
    }

    /// The declarations listed under `## Interface NAME`, up to the next `## ` heading.
    static func listed(_ interface: String, in text: String) -> Listed {
        var result = Listed()
        var section: String?
        var inside = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                inside = line == "## Interface \(interface)"
                continue
            }
            guard inside else { continue }
            if line == "Methods:" || line == "Types:" || line == "Errors:" {
                section = String(line.dropLast())
                continue
            }
            if line.hasPrefix("What the fields mean") || line.hasPrefix("Mandatory") { section = nil }
            guard let section, line.hasPrefix("- `") else { continue }
            let body = line.dropFirst(3)
            guard let close = body.firstIndex(of: "`") else { continue }
            let head = body[..<close]
            let tail = body[body.index(after: close)...]
            switch section {
            case "Methods":
                guard let open = head.firstIndex(of: "("), head.hasSuffix(")") else { continue }
                let name = String(head[..<open])
                result.methodParameters[name] = names(head[head.index(after: open)..<head.index(before: head.endIndex)])
                let reply = tail.split(separator: "`", omittingEmptySubsequences: false)
                result.methodReplies[name] = reply.count > 1 ? names(reply[1]) : []
            case "Types":
                let values = tail.split(separator: "`", omittingEmptySubsequences: false)
                result.types[String(head)] = values.count > 1 ? names(values[1]) : []
            default:
                guard let open = head.firstIndex(of: "("), head.hasSuffix(")") else { continue }
                result.errors[String(head[..<open])] =
                    names(head[head.index(after: open)..<head.index(before: head.endIndex)])
            }
        }
        return result
    }

    static func declared(_ idl: IDL) -> Listed {
        Listed(
            methodParameters: idl.methodParameters, methodReplies: idl.methodReplies,
            types: idl.types.mapValues {
                switch $0 {
                case .fields(let names), .values(let names): names
                }
            },
            errors: idl.errors)
    }

    @Test(arguments: InterfaceDescriptions.names)
    func everyMethodTypeAndErrorOfTheIDLIsListedWithItsFields(interface: String) throws {
        let idl = IDL(try #require(InterfaceDescriptions.description(of: interface)))
        let listed = Self.listed(interface, in: Self.document)
        let declared = Self.declared(idl)
        #expect(listed.methodParameters == declared.methodParameters, "method parameters of \(interface)")
        #expect(listed.methodReplies == declared.methodReplies, "method replies of \(interface)")
        #expect(listed.types == declared.types, "types of \(interface)")
        #expect(listed.errors == declared.errors, "errors of \(interface)")
    }

    @Test func aFieldMissingFromTheDocumentIsFound() throws {
        let idl = IDL(try #require(InterfaceDescriptions.description(of: "io.discoverd.Resolver")))
        let edited = Self.document.replacingOccurrences(of: "staleSeconds?, timing, note?, confirmed?, dnssec`", with: "timing, note?, confirmed?, dnssec`")
        #expect(Self.listed("io.discoverd.Resolver", in: edited) != Self.declared(idl))
        #expect(!Self.document.isEmpty, "docs/API.md is readable")
    }
}
