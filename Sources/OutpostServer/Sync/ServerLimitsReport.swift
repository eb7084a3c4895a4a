import OutpostCore

extension SyncServer {
    /// The push limits as this server enforces them, read from the same
    /// constants and configuration the checks use, for `GET /v1/health`.
    var limits: HealthResponse.Limits {
        HealthResponse.Limits(
            maxBodyBytes: config.maxBodyBytes, maxMutations: PushRequest.maximumMutations,
            maxFieldBytes: Validator.maxTextLength, maxDepth: RequestGuard.maxDepth)
    }
}
