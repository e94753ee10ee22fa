/// Reads the declarations of a varlink interface description (the subset our IDL uses): named types (structs and
/// enums), methods with their parameter and reply structs, and errors.
struct IDL {
    /// A struct's field names, or an enum's values.
    enum Shape: Equatable {
        case fields([String])
        case values([String])
    }

    var interface = ""
    var types: [String: Shape] = [:]
    var methodParameters: [String: [String]] = [:]
    var methodReplies: [String: [String]] = [:]
    var errors: [String: [String]] = [:]

    init(_ text: String) {
        // Comments end at the line's end; then the declarations are one token stream.
        let code = text.split(separator: "\n").map { line in
            line.firstIndex(of: "#").map { line[..<$0] } ?? line
        }.joined(separator: " ")
        var scanner = Scanner(Array(code))
        while let word = scanner.word() {
            switch word {
            case "interface": interface = scanner.word() ?? ""
            case "type":
                let name = scanner.word() ?? ""
                types[name] = scanner.shape()
            case "method":
                let name = scanner.word() ?? ""
                methodParameters[name] = scanner.shape().fieldNames
                scanner.skip("->")
                methodReplies[name] = scanner.shape().fieldNames
            case "error":
                let name = scanner.word() ?? ""
                errors[name] = scanner.shape().fieldNames
            default: break
            }
        }
    }

    private struct Scanner {
        let characters: [Character]
        var index = 0
        init(_ characters: [Character]) { self.characters = characters }

        mutating func skipSpace() {
            while index < characters.count, characters[index].isWhitespace { index += 1 }
        }

        mutating func skip(_ literal: String) {
            skipSpace()
            for character in literal where index < characters.count && characters[index] == character { index += 1 }
        }

        /// An identifier (letters, digits, dots, underscores), or nil at the end.
        mutating func word() -> String? {
            skipSpace()
            var word = ""
            while index < characters.count,
                characters[index].isLetter || characters[index].isNumber || characters[index] == "."
                    || characters[index] == "_"
            {
                word.append(characters[index])
                index += 1
            }
            if word.isEmpty && index < characters.count {
                index += 1
                return self.word()
            }
            return word.isEmpty ? nil : word
        }

        /// A parenthesised struct or enum: the top-level names, and whether they had `:` (fields).
        mutating func shape() -> Shape {
            skipSpace()
            guard index < characters.count, characters[index] == "(" else { return .fields([]) }
            index += 1
            var depth = 1
            var names: [String] = []
            var current = ""
            var isStruct = false
            var awaitingName = true
            while index < characters.count, depth > 0 {
                let character = characters[index]
                index += 1
                switch character {
                case "(": depth += 1
                case ")":
                    depth -= 1
                    if depth == 0, awaitingName, !current.isEmpty { names.append(current) }
                case ":" where depth == 1:
                    isStruct = true
                    names.append(current)
                    current = ""
                    awaitingName = false
                case "," where depth == 1:
                    if awaitingName, !current.isEmpty { names.append(current) }
                    current = ""
                    awaitingName = true
                default:
                    if depth == 1, awaitingName, !character.isWhitespace { current.append(character) }
                }
            }
            return isStruct ? .fields(names) : (names.isEmpty ? .fields([]) : .values(names))
        }
    }
}

extension IDL.Shape {
    var fieldNames: [String] {
        if case .fields(let names) = self { return names }
        return []
    }
}
