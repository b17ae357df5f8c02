// Uploads and downloads in the app's shared storage (<storageDir>/files/inbox/).

// a file name, not a path: the storage sandbox refuses '../' anyway, this keeps names tidy
function safeName(name) {
  return String(name || 'upload.bin').replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
}

// POST files/upload (multipart/form-data): every file goes to inbox/<name>
export function upload(ctx) {
  const parts = ctx.getParts().filter((p) => p.getSubmittedFileName() !== null);
  if (parts.length === 0) platform.app.abort('send the files as multipart/form-data', 400);
  return parts.map((part) => {
    const name = safeName(part.getSubmittedFileName());
    return { name, size: part.saveStorage('inbox/' + name).size, contentType: part.getContentType() };
  });
}

// GET files/download?name=notes.txt (returnType File): streamed from storage, as an attachment
export function download(ctx) {
  const name = ctx.query.name;
  if (typeof name !== 'string' || name === '') platform.app.abort('?name= is required', 400);
  return { storagePath: 'inbox/' + safeName(name), name: safeName(name), contentDisposition: 'attachment' };
}
