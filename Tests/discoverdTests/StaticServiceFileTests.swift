import Testing

@testable import discoverd

@Suite("Static service files: INI and Avahi XML")
struct StaticServiceFileTests {
    /// As /etc/avahi/services files look (avahi.service(5)): prolog, DOCTYPE, comments, two services.
    let avahiFile = """
        <?xml version="1.0" standalone='no'?><!--*-nxml-*-->
        <!DOCTYPE service-group SYSTEM "avahi-service.dtd">
        <!-- See avahi.service(5) -->
        <service-group>
          <name replace-wildcards="yes">Printer on %h</name>
          <service protocol="ipv4">
            <type>_ipp._tcp</type>
            <subtype>_universal._sub._ipp._tcp</subtype>
            <port>631</port>
            <txt-record>rp=printers/a</txt-record>
            <txt-record>Color</txt-record>
            <txt-record>empty=</txt-record>
            <txt-record value-format="binary-hex">bin=ff00</txt-record>
            <txt-record value-format="binary-base64">b64=aGk=</txt-record>
          </service>
          <service>
            <type>_http._tcp</type>
            <domain-name>local</domain-name>
            <host-name>printer.local</host-name>
            <port>80</port>
          </service>
        </service-group>
        """

    @Test("an Avahi XML file gives one definition per <service>, sharing the name, TXT in file order")
    func parsesAvahiXML() throws {
        let definitions = try StaticServiceDefinition.parseFile(avahiFile, source: "p.service", hostName: "lab-a")
        #expect(definitions.count == 2)
        let ipp = definitions[0]
        #expect(ipp.name == "Printer on lab-a")
        #expect(ipp.type == "_ipp._tcp")
        #expect(ipp.port == 631)
        #expect(ipp.subtypes == ["_universal._sub._ipp._tcp"])
        let expectedTXT: [[UInt8]] = [
            Array("rp=printers/a".utf8), Array("Color".utf8), Array("empty=".utf8),
            Array("bin=".utf8) + [0xFF, 0x00], Array("b64=hi".utf8),
        ]
        #expect(ipp.txt == expectedTXT)
        let http = definitions[1]
        #expect(http.name == "Printer on lab-a")
        #expect(http.domain == "local")
        #expect(http.host == "printer.local")
        #expect(http.port == 80)
    }

    @Test("a bare %h name follows Avahi's host name; without replace-wildcards %h stays literal; port defaults to 0")
    func names() throws {
        func parse(_ nameElement: String) throws -> [StaticServiceDefinition] {
            let text = "<service-group>\(nameElement)<service><type>_ssh._tcp</type></service></service-group>"
            return try StaticServiceDefinition.parseFile(text, source: "s.service", hostName: "lab-a")
        }
        #expect(try parse(#"<name replace-wildcards="yes">%h</name>"#).first?.name == nil)
        #expect(try parse("<name>%h</name>").first?.name == "%h")
        #expect(try parse("<name>SSH</name>").first?.port == 0)
    }

    @Test(
        "malformed or unsupported XML is refused with the file, the format and the line",
        arguments: [
            ("<service-group><service><type>_a._tcp</type></service></service-group>", "without <name>"),
            ("<service-group><name>x</name></service-group>", "without <service>"),
            ("<service-group><name>x</name><service><port>1</port></service></service-group>", "without <type>"),
            ("<service-group><name>x</name><bogus/></service-group>", "unexpected element <bogus>"),
            ("<services/>", "unexpected element <services>"),
            (
                "<service-group><name>x</name><service><type>_a._tcp</type><port>70000</port></service></service-group>",
                "port '70000'"
            ),
            (
                #"<service-group><name>x</name><service protocol="ipx"><type>_a._tcp</type></service></service-group>"#,
                "protocol must be"
            ),
            (
                "<service-group><name>x</name><service><type>_a._tcp</type><txt-record>a=1</txt-record>"
                    + "<txt-record>A=2</txt-record></service></service-group>",
                "given twice"
            ),
            ("<service-group><name>x</name>", "not a valid Avahi XML service file"),
        ]
    )
    func refusesBadXML(text: String, reason: String) {
        do {
            _ = try StaticServiceDefinition.parseFile(text, source: "bad.service", hostName: "h")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description.hasPrefix("bad.service: "), "\(error)")
            #expect(error.description.contains("XML"), "names the format: \(error)")
            #expect(error.description.contains(reason), "\(error)")
        }
    }

    @Test("INI files: txt keeps boolean keys bare and refuses a repeated key")
    func iniTXT() throws {
        let text = "[service]\nname = x\ntype = _a._tcp\nport = 1\ntxt = flag\ntxt = k=v\ntxt = e=\n"
        let definitions = try StaticServiceDefinition.parseFile(text, source: "x.service", hostName: "h")
        #expect(definitions.map(\.txt) == [[Array("flag".utf8), Array("k=v".utf8), Array("e=".utf8)]])
        #expect(throws: ConfigurationError.self) {
            try StaticServiceDefinition.parseFile(text + "txt = FLAG=1\n", source: "x.service", hostName: "h")
        }
    }
}
