import CloudSyncXML
import Foundation
import Testing

/// Records events as lines, for comparing parses.
private final class Recorder: XMLEventHandler {
    var lines: [String] = []
    var text = ""

    func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws {
        flush()
        let attrs = attributes.map { " {\($0.namespace)}\($0.name)=\($0.value)" }.joined()
        lines.append("<{\(namespace)}\(name)\(attrs)>")
    }

    func endElement(namespace: String, name: String) throws {
        flush()
        lines.append("</{\(namespace)}\(name)>")
    }

    func characters(_ utf8: UnsafeRawBufferPointer) throws {
        text += String(decoding: utf8, as: UTF8.self)
    }

    private func flush() {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if !trimmed.isEmpty { lines.append("text:\(trimmed)") }
        text = ""
    }
}

private struct Stop: Error {}

private final class StopAtSecond: XMLEventHandler {
    var seen = 0
    func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws {
        seen += 1
        if seen == 2 { throw Stop() }
    }
    func endElement(namespace: String, name: String) throws {}
    func characters(_ utf8: UnsafeRawBufferPointer) throws {}
}

private func parse(_ text: String, chunk: Int = .max, limits: XMLLimits = XMLLimits()) throws -> [String] {
    let recorder = Recorder()
    let parser = try XMLPushParser(handler: recorder, limits: limits)
    let bytes = Array(text.utf8)
    var at = 0
    while at < bytes.count {
        let end = min(bytes.count, at + chunk)
        try bytes[at ..< end].withUnsafeBytes { try parser.feed($0) }
        at = end
    }
    try parser.finish()
    return recorder.lines
}

@Suite struct XMLPushParserTests {
    static let multistatus = """
        <?xml version="1.0" encoding="utf-8"?>
        <D:multistatus xmlns:D="DAV:" xmlns:lp1="DAV:" xmlns:oc="http://owncloud.org/ns">
        <D:response><D:href>/a%20b/Caf&#233; &amp; &lt;x&gt;.mp3</D:href>
        <D:propstat><D:prop><lp1:getcontentlength>42</lp1:getcontentlength><oc:checksums><![CDATA[SHA1:ab]]></oc:checksums>
        <D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
        </D:multistatus>
        """

    /// Prefixes resolve to namespace URIs; entities, character references and CDATA arrive as text.
    @Test func namespacesTextAndEntities() throws {
        let lines = try parse(Self.multistatus)
        #expect(lines.first == "<{DAV:}multistatus>")
        #expect(lines.contains("text:/a%20b/Café & <x>.mp3"))
        #expect(lines.contains("<{DAV:}getcontentlength>"))
        #expect(lines.contains("<{http://owncloud.org/ns}checksums>"))
        #expect(lines.contains("text:SHA1:ab"))
        #expect(lines.last == "</{DAV:}multistatus>")
    }

    /// Feeding one byte at a time (a UTF-8 sequence split across chunks included) gives the same events.
    @Test(arguments: [1, 2, 3, 7, 64])
    func chunkingDoesNotChangeEvents(chunk: Int) throws {
        #expect(try parse(Self.multistatus, chunk: chunk) == parse(Self.multistatus))
    }

    @Test func attributesCarryNamespaces() throws {
        let lines = try parse(#"<a xmlns="urn:x" xmlns:y="urn:y" y:k="v" plain="p&amp;q"/>"#)
        #expect(lines == ["<{urn:x}a {urn:y}k=v {}plain=p&q>", "</{urn:x}a>"])
    }

    /// A DTD is refused outright: no entity expansion (billion laughs), no external entity (XXE).
    @Test(arguments: [
        #"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><a>&lol2;</a>"#,
        #"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><a>&xxe;</a>"#,
        #"<!DOCTYPE a SYSTEM "http://127.0.0.1:1/x.dtd"><a/>"#,
    ])
    func dtdsAreRefused(document: String) {
        #expect(throws: XMLError.self) { try parse(document) }
    }

    @Test func undefinedEntityIsAnError() {
        #expect(throws: XMLError.self) { try parse("<a>&nbsp;</a>") }
    }

    @Test(arguments: ["", "<a>", "<a></b>", "<a/><b/>", "not xml", "<a x=1/>"])
    func malformedDocumentsThrow(document: String) {
        #expect(throws: XMLError.self) { try parse(document) }
    }

    @Test func errorsCarryAPosition() throws {
        do {
            _ = try parse("<a>\n<b>\n</c></a>")
            Issue.record("expected an error")
        } catch let error as XMLError {
            #expect(error.line == 3)
        }
    }

    @Test func depthIsBounded() {
        let deep = String(repeating: "<a>", count: 100) + String(repeating: "</a>", count: 100)
        #expect(throws: XMLError.self) { try parse(deep, limits: XMLLimits(maxDepth: 64)) }
        #expect((try? parse(deep, limits: XMLLimits(maxDepth: 100))) != nil)
    }

    @Test func sizeIsBounded() {
        let doc = "<a>" + String(repeating: "x", count: 5000) + "</a>"
        #expect(throws: XMLError.self) { try parse(doc, limits: XMLLimits(maxDocumentBytes: 4096)) }
    }

    /// A handler's error stops the parse and is rethrown as it was thrown.
    @Test func handlerErrorsStopTheParse() throws {
        let handler = StopAtSecond()
        let parser = try XMLPushParser(handler: handler)
        #expect(throws: Stop.self) { try parser.feed(Data("<a><b/><c/><d/></a>".utf8)) }
        #expect(handler.seen == 2)
    }

    /// A 20 MB document (beyond libxml2's default 10 MB text limits) parses in flat memory.
    @Test func hugeDocumentsParse() throws {
        final class Counter: XMLEventHandler {
            var elements = 0
            func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws { elements += 1 }
            func endElement(namespace: String, name: String) throws {}
            func characters(_ utf8: UnsafeRawBufferPointer) throws {}
        }
        let counter = Counter()
        let parser = try XMLPushParser(handler: counter)
        try parser.feed(Data(#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#.utf8))
        let response = Data("<d:response><d:href>/music/some%20folder/a%20long%20track%20name%20number.flac</d:href><d:propstat><d:prop><d:getcontentlength>12345678</d:getcontentlength></d:prop></d:propstat></d:response>\n".utf8)
        var total = 0
        var count = 0
        while total < 20 << 20 {
            try parser.feed(response)
            total += response.count
            count += 1
        }
        try parser.feed(Data("</d:multistatus>".utf8))
        try parser.finish()
        #expect(counter.elements == 1 + 5 * count)
    }
}
