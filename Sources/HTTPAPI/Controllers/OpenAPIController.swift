import Foundation
import Hummingbird
import SubledgerApp

/// `GET /openapi.yaml`: the API described for clients and generators. No key.
struct OpenAPIController {
    func addRoutes(to router: Router<AppRequestContext>) {
        let document = OpenAPIDocument.yaml
        router.get("openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"],
                     body: .init(byteBuffer: ByteBuffer(data: document)))
        }
    }
}

/// The OpenAPI 3.1 document of the whole API (the contract of docs/api.md), the
/// package resource `Resources/openapi.yaml` served as it is. A test walks the
/// router's routes against it, and CI validates it as OpenAPI 3.1.
package enum OpenAPIDocument {
    package static let yaml: Data = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
              let data = try? Data(contentsOf: url)
        else { fatalError("the openapi.yaml resource is missing from the HTTPAPI bundle") }
        return data
    }()
}
