// Uploads and downloads in the app's shared storage (<storageDir>/files/inbox/).

function safeName(name) {
  // a file name, not a path: the storage sandbox refuses '../' anyway, this keeps names tidy
  return String(name || 'upload.bin').replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
}

export function upload(ctx) {
  var parts = ctx.getParts().filter(function (p) { return p.getSubmittedFileName() !== null; });
  if (parts.length === 0) platform.app.abort('send the files as multipart/form-data', 400);
  return parts.map(function (part) {
    var name = safeName(part.getSubmittedFileName());
    var saved = part.saveStorage('inbox/' + name);
    return { name: name, size: saved.size, contentType: part.getContentType() };
  });
}

export function download(ctx) {
  var name = ctx.query.name;
  if (typeof name !== 'string' || name === '') platform.app.abort('?name= is required', 400);
  return { storagePath: 'inbox/' + safeName(name), name: safeName(name), contentDisposition: 'attachment' };
}
