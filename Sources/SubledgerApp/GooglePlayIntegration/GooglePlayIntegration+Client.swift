import Foundation
import GooglePlay
import Logging

extension GooglePlayIntegration {
    /// The Play Developer API client for the service account's key file;
    /// an unreadable or malformed file names the variable to fix.
    static func makeClient(keyFile: String, packageName: String, apiURL: String,
                           logger: Logger) throws(ConfigurationError) -> GooglePlayAPIClient {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        } catch {
            throw ConfigurationError(variable: ConfigurationVariable.googlePlayServiceAccountFile.name,
                                     message: "cannot read \(keyFile): \(error.localizedDescription)")
        }
        let key: ServiceAccountKey
        do {
            key = try ServiceAccountKey(json: data)
        } catch {
            throw ConfigurationError(variable: ConfigurationVariable.googlePlayServiceAccountFile.name, message: "\(error)")
        }
        var settings = GooglePlayAPISettings()
        settings.credentialsHint = "\(ConfigurationVariable.googlePlayServiceAccountFile.name) and \(ConfigurationVariable.googlePlayPackageName.name)"
        return GooglePlayAPIClient(serviceAccount: key, packageName: packageName, apiURL: apiURL, settings: settings, logger: logger)
    }
}

extension GooglePlayAPIClient: GooglePlayPurchaseSource {}
